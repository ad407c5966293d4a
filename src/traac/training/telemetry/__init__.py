"""What a training run records and reads back: step stats, copies, metrics.jsonl."""
