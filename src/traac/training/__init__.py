"""Training on TRL's GRPO, one subpackage per job: `step` (the TRAAC step, pure phases and
their driver), `trl_adapter` (`TRAACTrainer` over TRL), `planning` (the recipe and the memory,
before a model loads), `telemetry` (what a run records) and `methods` (every training method)."""
