"""Training on TRL's GRPO, one subpackage per job, each importing only those listed after it:
`trl_adapter` (`TRAACTrainer` over TRL), `planning` (the recipe and the memory, before a model
loads), `methods` (every training method), `step` (the TRAAC step, pure phases and their driver)
and `telemetry` (what a run records)."""
