"""Prompt styles: the paper's baseline instructions, through the model's chat template."""

from __future__ import annotations

import pytest

from traac.common.items import Item
from traac.errors import TraacError
from traac.evaluation.harness.prompts import (
    build_prompt,
    default_prompt_style,
    render_prompt,
    user_message,
)

ITEM = Item(id="q", question="What is 2+3?", answer="5")


class ChatTemplate:
    """The one tokenizer method prompts use, rendering like a ChatML template."""

    chat_template = "chatml"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return turns + "<|im_start|>assistant\n"


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (
            "base",
            "What is 2+3? Let's think step by step and output the final answer within \\boxed{}",
        ),
        (
            "l1-max",
            "What is 2+3? Let's think step by step and output the final answer within \\boxed{}. "
            "Think for maximum 10000 tokens.",
        ),
        (
            "lc-r1",
            "What is 2+3? Please reason step by step, and put your final answer within \\boxed{}",
        ),
        ("adaptthink", "What is 2+3?"),
        ("question", "What is 2+3?"),  # the testbed model's style: the question alone
        (
            "think",
            "What is 2+3? Think step by step between <think> and </think> first, then give the "
            "final answer within \\boxed{}.",
        ),
    ],
)
def test_user_message_per_style(style, expected):
    assert user_message(ITEM, style) == expected


def test_build_prompt_applies_the_chat_template_with_generation_prompt():
    prompt = build_prompt(ITEM, ChatTemplate(), "base")
    assert prompt.startswith("<|im_start|>user\nWhat is 2+3? Let's think")
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tokenskip_uses_its_own_template_with_the_ratio():
    prompt = build_prompt(ITEM, None, "tokenskip")
    assert "put your final answer within \\boxed{}.\nWhat is 2+3?<|eot_id|>0.5<|eot_id|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_unknown_style_and_missing_template_are_errors():
    with pytest.raises(TraacError, match="prompt style"):
        user_message(ITEM, "fancy")

    class NoTemplate:
        chat_template = None

    with pytest.raises(TraacError, match="no chat template"):
        build_prompt(ITEM, NoTemplate(), "base")


def test_render_prompt_applies_the_chat_template(char_tokenizer):
    template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tokenizer = char_tokenizer(["<pad>", "<eos>"], eos="<eos>", chat_template=template)
    assert render_prompt(tokenizer, "2+2?") == "<|user|>2+2?\n<|assistant|>"


def test_a_chat_template_without_a_think_block_is_asked_for_one():
    """An instruct model whose template never opens a think block (SmolLM2) gets the `think`
    style; a reasoning model's template, or none, keeps `base`."""

    class Template:
        def __init__(self, template):
            self.chat_template = template

    assert default_prompt_style(Template("{{ '<|im_start|>assistant\\n' }}")) == "think"
    assert default_prompt_style(Template("{{ '<|assistant|><think>\\n' }}")) == "base"
    assert default_prompt_style(Template("{{ '[[' }}"), think_open="[[") == "base"
    assert default_prompt_style(Template(None)) == "base"
