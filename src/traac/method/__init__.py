"""Peer methods for adaptive-length reasoning, hosted on the same GRPO trainer as TRAAC."""
