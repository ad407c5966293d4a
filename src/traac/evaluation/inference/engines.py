"""The names of the inference engines' choices, importable without torch: the commands offer
them as option choices and check them before any model loads."""

from __future__ import annotations

BACKENDS = ("transformers", "vllm")
BATCHINGS = ("padded", "refill")  # the transformers backend's (`traac.evaluation.inference.refill`)
PROBE_MODES: tuple[str, ...] = ("cached", "reforward")  # test-time compression's probe

# Requests per call to an engine that schedules its own batch (vLLM): four times the most
# sequences vLLM 0.31 runs at once offline (1,024 on an H100 or larger, else 256), so its batch
# stays full but for each call's tail, and few enough that each call's samples reach
# samples.jsonl when it returns: a crash loses one call's work, not the run's.
CALL_REQUESTS = 4096
