"""Prompt styles of the paper's baselines (appendix "Baseline prompts").

Each method is evaluated with the instruction it was trained with, so the comparison measures
the method rather than a prompt mismatch. The user message goes through the model's own chat
template with the generation prompt; TokenSkip instead uses its fixed ChatML template, which
carries the compression ratio its SFT data was made with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traac.common.items import Item
from traac.errors import TraacError

BOXED_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}"
LCR1_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}"
THINK_INSTRUCTION = (
    "Think step by step between <think> and </think> first, then give the final answer "
    "within \\boxed{}."
)
L1_BUDGET = 10000  # L1-Max was trained (and is evaluated) with this budget in its prompt

# style -> instruction appended to the question (None: the question alone).
PROMPT_STYLES: dict[str, str | None] = {
    "base": BOXED_INSTRUCTION,
    "l1-max": f"{BOXED_INSTRUCTION}. Think for maximum {L1_BUDGET} tokens.",
    "lc-r1": LCR1_INSTRUCTION,
    "adaptthink": None,
    "question": None,  # the question alone: what the testbed model was taught
    "think": THINK_INSTRUCTION,  # asks for the think block a chat template does not open
    "tokenskip": None,  # a whole raw template, see `build_prompt`
}
TOKENSKIP_RATIO = 0.5
TOKENSKIP_TEMPLATE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n{instruction}.\n{question}<|eot_id|>{ratio}<|eot_id|><|im_end|>\n"
    "<|im_start|>assistant\n"
)


def default_prompt_style(tokenizer: Any, think_open: str = "<think>") -> str:
    """`base`, or `think` for a chat model whose template never mentions the think opener (an
    instruct model that was not trained to reason): its prompt must ask for the think block,
    or every response counts as unclosed thinking."""
    template = getattr(tokenizer, "chat_template", None)
    return "think" if isinstance(template, str) and think_open not in template else "base"


def user_message(item: Item | str, style: str = "base") -> str:
    """The user turn: the question (options included for multiple choice) + the instruction."""
    question = item if isinstance(item, str) else item.question
    if style not in PROMPT_STYLES:
        raise TraacError(f"prompt style {style!r}: use one of {', '.join(PROMPT_STYLES)}")
    instruction = PROMPT_STYLES[style]
    return question.rstrip() if instruction is None else f"{question.rstrip()} {instruction}"


def build_prompt(item: Item | str, tokenizer: Any, style: str = "base") -> str:
    """The exact text the model continues: chat template + generation prompt (or TokenSkip's)."""
    if style == "tokenskip":
        question = item if isinstance(item, str) else item.question
        return TOKENSKIP_TEMPLATE.format(
            instruction=LCR1_INSTRUCTION, question=question.rstrip(), ratio=TOKENSKIP_RATIO
        )
    message = user_message(item, style)
    if not getattr(tokenizer, "chat_template", None):
        raise TraacError(
            "the tokenizer has no chat template: evaluate a chat model, or --prompt-style tokenskip"
        )
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
    )


def render_prompt(tokenizer: Any, question: str | Sequence[dict[str, str]]) -> str:
    """Model input for a question (one user turn) or a message list, through the tokenizer's
    chat template with the generation prompt; a tokenizer without one gets the text as is."""
    messages = [{"role": "user", "content": question}] if isinstance(question, str) else question
    if not getattr(tokenizer, "chat_template", None):
        if not isinstance(question, str):
            raise TraacError("the tokenizer has no chat template to render a message list with")
        return question
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
