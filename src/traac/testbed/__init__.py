"""The testbed: a tiny Qwen3 reasoning model that over- and under-thinks, built offline on the CPU.

TRAAC needs a model to fix; without a GPU or a model hub the project builds its own. A
procedural teacher writes `chain_sum` thinking traces with redundant re-checks after the answer
(overthinking, on every tier alike) and early guesses on long chains (underthinking); TRL's
SFTTrainer teaches them to a 0.86M-parameter Qwen3ForCausalLM. The build also measures the
model (accuracy, think length, re-checks, attention-probe statistics) into `testbed_card.json`.

Public API (cheap to import; torch and transformers load only when a build runs):
- `ensure_testbed(quick=False, seed=0) -> Path`: the model directory, built once into the cache.
- `make_items(tier, n, seed, split="eval") -> list[Item]`: problems of a tier (or `all`).
- `parse_spec("testbed:easy?n=200&seed=7") -> list[Item]`: dataset names for eval and training.

Seeds: the build's `seed` (SFT_SEED, default 0) draws the SFT problems, the teacher's choices
and the initial weights; RL_SEED is the default of `?split=rl` (RL prompts), EVAL_SEED the
default of evaluation specs and of the card's measurement. Problems are also split into three
disjoint pools by a hash of the expression, so no seed makes an evaluation problem a training one.
"""

from traac.testbed.build import (
    CARD,
    build_cached,
    build_testbed,
    cache_path,
    cache_root,
    ensure_testbed,
)
from traac.testbed.config import EVAL_SEED, RL_SEED, SFT_SEED, TestbedConfig, default_config
from traac.testbed.problems import DEFAULT_N, make_items, parse_spec, split_of

__all__ = [
    "CARD",
    "DEFAULT_N",
    "EVAL_SEED",
    "RL_SEED",
    "SFT_SEED",
    "TestbedConfig",
    "build_cached",
    "build_testbed",
    "cache_path",
    "cache_root",
    "default_config",
    "ensure_testbed",
    "make_items",
    "parse_spec",
    "split_of",
]
