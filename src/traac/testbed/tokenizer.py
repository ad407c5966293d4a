"""The testbed's tokenizer: a small byte-level BPE trained offline, saved in Hugging Face format.

Byte-level, so any prompt another command sends encodes without unknown tokens; no token spans
two digits, so the model adds digit by digit; merges may cross spaces, so the teacher's stock
phrases cost one token each (short sequences: CPU time); the think delimiters are single added
tokens that are not "special" (as in Qwen3), so `decode(skip_special_tokens=True)` keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
PAD = "<|pad|>"
IM_START = "<|im_start|>"
EOS = "<|im_end|>"

# ChatML, one message after another; the generation prompt opens the assistant turn and the
# response itself writes <think> (Qwen3 layout: formats.ChatFormat() default). No newline after
# the last <|im_end|>, so prompt + completion tokenizes as prompt, then completion.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if not loop.first -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '\\n<|im_start|>assistant\\n' }}{%- endif -%}"
)


def build_tokenizer(corpus: Iterable[str], vocab_size: int) -> Any:
    """Train the BPE on `corpus` and wrap it as a fast Hugging Face tokenizer."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            # Pieces BPE never merges across: line breaks (one step per line, so no token
            # straddles two steps), a minus sign and each digit, with the space before it if
            # any (" 13" -> " 1", "3"). Between them merges may span spaces, so stock phrases
            # ("So the answer is") become single tokens.
            pre_tokenizers.Split(Regex(r"\n| ?-| ?[0-9]"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, IM_START, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # The delimiters are added tokens (matched before any merge); keep them out of the BPE's
    # corpus so no merges are spent on spelling them.
    delimiters = re.compile(f"{re.escape(THINK_OPEN)}|{re.escape(THINK_CLOSE)}")
    core.train_from_iterator((delimiters.sub("\n", text) for text in corpus), trainer)
    core.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t in (THINK_OPEN, THINK_CLOSE)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",  # generation pads on the left
        model_max_length=1024,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def render_prompts(tokenizer: Any, questions: list[str]) -> list[str]:
    """The chat-template prompt (with the generation prompt) of each question.

    The testbed's template inserts a user message verbatim, so it is rendered once around a
    sentinel instead of once per question (Jinja costs milliseconds a call on a busy CPU).
    """
    sentinel = "\x00question\x00"
    head, tail = tokenizer.apply_chat_template(
        [{"role": "user", "content": sentinel}], add_generation_prompt=True, tokenize=False
    ).split(sentinel)
    return [head + q + tail for q in questions]
