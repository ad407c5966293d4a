"""The inference engine: generation backends (transformers, vLLM), refill batching, and
test-time thinking (think budgets, compression of the think block, the answer after it)."""
