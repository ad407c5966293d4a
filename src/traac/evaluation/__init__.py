"""Evaluation and generation the way the paper reports them: prompts, generation backends,
test-time compression, the evaluation loop and its records, reports and plots."""
