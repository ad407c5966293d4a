"""The TRL and transformers internals `TRAACTrainer` relies on, as names and parameters.

`tests/training/trl_adapter/test_trl_contract.py` checks each against the installed TRL, so an
upgrade that moves one fails there, not at a run's first step; the trainer's docstring says why each
hook is overridden.
"""

from __future__ import annotations

# The hooks the trainer overrides, as (name, parameters).
TRL_HOOKS: dict[str, tuple[str, ...]] = {
    "_generate_and_score_completions": ("self", "inputs"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    # TRAACTrainer takes the media inputs (all None for text) as **media
    "_get_per_token_logps_and_entropies": (
        "self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size",
        "compute_entropy", "compute_aux_loss", "pixel_values", "image_grid_thw", "num_images",
        "pixel_attention_mask", "spatial_shapes", "num_tiles", "image_sizes", "token_type_ids",
        "mm_token_type_ids", "image_position_ids",
    ),
    "evaluation_loop": ("self", "dataloader", "description", "prediction_loss_only",
                        "ignore_keys", "metric_key_prefix"),  # transformers' (HeldOutEvaluation)
}  # fmt: skip
# TRL internals called but not overridden, likewise checked.
TRL_CALLS: dict[str, tuple[str, ...]] = {
    "_tokenize_prompts": ("self", "prompts"),
    "_generate_single_turn": (
        "self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images",
    ),
    "_get_output_dir": ("self", "trial"),
}  # fmt: skip
# Keys of the batch TRL generates and `_compute_loss` reads that dynamic sampling rewrites.
TRL_BATCH_KEYS = ("completion_mask", "advantages", "num_items_in_batch")
# (The key of `rollout_func`'s output TRL reads as its tool mask is the copies' to write:
# `traac.training.step.copy_rules.TRL_ROLLOUT_MASK`, checked with these.)
TRL_ATTRIBUTES = (
    "_tokenizer", "_metrics", "eos_token_ids", "use_vllm", "max_completion_length",
    "reward_func_names", "ref_model", "generation_config", "generation_kwargs", "rollout_func",
    "num_generations", "num_generations_eval",
)  # fmt: skip
TRANSFORMERS_ATTRIBUTES = ("model_wrapped",)  # transformers' Trainer
TRL_VLLM_ATTRIBUTES = ("vllm_generation", "_last_loaded_step")  # with use_vllm (tests: the fake)
