"""The testbed: a tiny Qwen3 reasoning model that over- and under-thinks, built offline on the CPU.

TRAAC needs a model to fix; without a GPU or a model hub the project builds its own. A
procedural teacher writes `chain_sum` thinking traces with redundant re-checks after the answer
(overthinking, on every tier alike) and early guesses on long chains (underthinking); TRL's
SFTTrainer teaches them to a 0.86M-parameter Qwen3ForCausalLM. The build also measures the
model (accuracy, think length, re-checks, attention-probe statistics) into `testbed_card.json`.

Its problems are data (`traac.data.testbed_problems`: the chain-sum tiers and their disjoint
pools; `parse_spec` reads "testbed:easy?n=200&seed=7"). Modules: `config` (what decides the
model; its hash keys the build cache), `traces` (the procedural teacher), `tokenizer`, `build`
(`ensure_testbed(quick=False, seed=0) -> Path`: the model directory, built once into the
cache) and `measure` (the card).

Seeds: the build's `seed` (SFT_SEED, default 0) draws the SFT problems, the teacher's choices
and the initial weights; RL_SEED is the default of `?split=rl` (RL prompts), EVAL_SEED the
default of evaluation specs and of the card's measurement. Problems are also split into three
disjoint pools by a hash of the expression, so no seed makes an evaluation problem a training one.
"""
