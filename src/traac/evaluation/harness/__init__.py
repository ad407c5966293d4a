"""The evaluation harness: prompts, the evaluation loop over an inference backend, its records
and samples files, and the metrics of a run (avg@k, pass@k, overthinking, paired comparisons)."""
