"""Think delimiters and where they live, so no model name ever appears in the algorithm.

A `ChatFormat` says which strings open and close the reasoning block and whether the prompt
already opened it (R1-distill templates end the prompt with the opener; Qwen3 lets the response
write it). Every module that splits a response into reasoning and answer goes through here, and
every count of a think block's tokens (`think_tokens`, `think_tokens_from_ids`: training's
telemetry and evaluation's records alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from traac.errors import TraacError

AUX_PROMPT = (
    "Time is up. I should stop thinking and now write a summary containing all key steps "
    "required to solve the problem."
)


@dataclass(frozen=True)
class ParsedResponse:
    """A response split at its think block: the one parse that compression, the rewards and
    evaluation all read (docs/method.md#step, #rewards).

    `one_block`: exactly one opener and one closer (the prompt's opener counted for formats
    that open the block there). `ordered`: an opener comes before a closer. The format reward
    pays each half independently; a rollout is compressed only when both hold.
    """

    reasoning: str  # text inside the think block ("" when there is none)
    answer: str  # text after the last closer ("" when the block never closed)
    closed: bool  # a closer was found
    one_block: bool
    ordered: bool

    @property
    def well_formed(self) -> bool:
        """One think block, opened before it closes: what compression may work on (text before
        the opener is allowed, as the format reward allows it; compression keeps only the block)."""
        return self.one_block and self.ordered


@dataclass(frozen=True)
class ChatFormat:
    """Think delimiters of a model family.

    `opener_in_prompt`: the chat template already emits the opener at the end of the prompt, so
    responses start inside the reasoning and contain only the closer.
    """

    think_open: str = "<think>"
    think_close: str = "</think>"
    opener_in_prompt: bool = False

    def __post_init__(self) -> None:
        if not self.think_open or not self.think_close:
            raise TraacError("chat format: think_open and think_close must be non-empty strings")
        if self.think_open == self.think_close:
            raise TraacError("chat format: think_open and think_close must differ")

    def parse(self, response: str) -> ParsedResponse:
        """Split a response into reasoning (after the first opener, or the prompt's) and answer
        (after the last closer)."""
        n_open = response.count(self.think_open)
        n_close = response.count(self.think_close)
        last_close = response.rfind(self.think_close)
        first_open = response.find(self.think_open)
        if self.opener_in_prompt:
            one_block = n_open == 0 and n_close == 1
            ordered = n_close >= 1
        else:
            one_block = n_open == 1 and n_close == 1
            ordered = 0 <= first_open < last_close
        if last_close < 0:
            return ParsedResponse("", "", closed=False, one_block=False, ordered=False)
        head = response[:last_close]
        opened = not self.opener_in_prompt and 0 <= first_open < last_close
        start = first_open + len(self.think_open) if opened else 0
        return ParsedResponse(
            reasoning=head[start:],
            answer=response[last_close + len(self.think_close) :],
            closed=True,
            one_block=one_block,
            ordered=ordered,
        )

    def probe_text(self, reasoning: str, aux_prompt: str = AUX_PROMPT) -> str:
        """The compression probe: opener + reasoning + auxiliary prompt + closer, nothing else."""
        sep = self.aux_separator(reasoning)
        return f"{self.think_open}{reasoning}{sep}{aux_prompt}{self.think_close}"

    @staticmethod
    def aux_separator(reasoning: str) -> str:
        """Whitespace between reasoning and auxiliary prompt (none if it already ends so)."""
        return "" if not reasoning or reasoning[-1].isspace() else "\n"

    def response_text(self, reasoning: str, answer: str) -> str:
        """The response for this reasoning and answer (the opener only if the model writes it)."""
        opener = "" if self.opener_in_prompt else self.think_open
        return f"{opener}{reasoning}{self.think_close}{answer}"

    def reasoning_context(self, prompt: str) -> str:
        """What the policy read before the reasoning: the prompt and, where the response opens
        the block, the opener (the confidence scorer's context)."""
        return prompt if self.opener_in_prompt else prompt + self.think_open

    def answer_prefix(self, reasoning: str) -> str:
        """What follows the prompt when the model re-answers from a given reasoning."""
        opener = "" if self.opener_in_prompt else self.think_open
        return f"{opener}{reasoning}{self.think_close}"


CHAT_FORMATS: dict[str, ChatFormat] = {
    # Qwen3 thinking models: the response opens and closes the block.
    "response-opens": ChatFormat(),
    # DeepSeek-R1 distills: the chat template ends the prompt with the opener.
    "prompt-opens": ChatFormat(opener_in_prompt=True),
}


def resolve_chat_format(
    name: str | None = None,
    *,
    think_open: str | None = None,
    think_close: str | None = None,
    tokenizer: Any = None,
) -> ChatFormat:
    """A preset by name, or 'auto': detected from the tokenizer's own chat template.

    Detection renders a generation prompt and checks whether it ends with the opener, so it
    reads what the template does, never a model name.
    """
    opener = think_open or ChatFormat.think_open
    closer = think_close or ChatFormat.think_close
    if name in (None, "auto"):
        opens = tokenizer is not None and _prompt_ends_with(tokenizer, opener)
        return ChatFormat(opener, closer, opener_in_prompt=opens)
    if name not in CHAT_FORMATS:
        raise TraacError(
            f"chat_format: unknown value {name!r}; use one of auto, {', '.join(CHAT_FORMATS)}"
        )
    return ChatFormat(opener, closer, opener_in_prompt=CHAT_FORMATS[name].opener_in_prompt)


def _prompt_ends_with(tokenizer: Any, opener: str) -> bool:
    """True when the tokenizer's generation prompt already opens the think block."""
    if not getattr(tokenizer, "chat_template", None):
        return False
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "1+1?"}], tokenize=False, add_generation_prompt=True
    )
    return rendered.rstrip().endswith(opener)


def think_tokens(response: str, tokenizer: Any, think_close: str = "</think>") -> int | None:
    """Tokens before the first closer (the text tokenized alone), or None if it never closes."""
    cut = response.find(think_close)
    if cut < 0:
        return None
    head = response[:cut]
    return len(tokenizer(head, add_special_tokens=False)["input_ids"]) if head else 0


def think_tokens_from_ids(ids: Sequence[int], close_ids: Sequence[int]) -> int | None:
    """Tokens before the first occurrence of the closer's token ids, or None."""
    if not close_ids:
        raise TraacError("think_tokens_from_ids: the closer has no token ids")
    ids, close = list(ids), list(close_ids)
    for i in range(len(ids) - len(close) + 1):
        if ids[i : i + len(close)] == close:
            return i
    return None
