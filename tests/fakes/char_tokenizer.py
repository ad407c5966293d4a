"""A tokenizer of one token per character, so that the methods' tests count tokens by hand."""

from __future__ import annotations


def char_ids(text: str) -> list[int]:
    """The token ids of `text`: one per character."""
    return [ord(c) for c in text]


class CharTokenizer:
    """As far as a method reads a tokenizer: encode (`__call__`) and `decode`."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": char_ids(text)}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(map(chr, ids))
