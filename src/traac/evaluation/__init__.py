"""Evaluation the way the paper reports it, in three rooms, each importing only the ones before:
`inference` (generation backends, refill batching, test-time thinking: think budgets and
compression), `harness` (prompts, the evaluation loop, its records and metrics) and `reports`
(tables, plots, the HTML report, the step viewer, the probe report)."""
