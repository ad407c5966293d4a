import pytest

from traac.compression.formats import (
    AUX_PROMPT,
    ChatFormat,
    resolve_chat_format,
    think_tokens,
    think_tokens_from_ids,
)
from traac.errors import TraacError


def test_parse_response_opens():
    fmt = ChatFormat()
    parsed = fmt.parse("<think>First, 2+2=4.</think>The answer is \\boxed{4}.")
    assert parsed.reasoning == "First, 2+2=4."
    assert parsed.answer == "The answer is \\boxed{4}."
    assert parsed.closed and parsed.well_formed


def test_parse_without_closer_and_malformed():
    fmt = ChatFormat()
    assert not fmt.parse("<think>never ends").closed
    twice = fmt.parse("<think>a</think>b</think>c")
    assert twice.closed and not twice.well_formed and twice.answer == "c"
    no_open = fmt.parse("a</think>b")
    assert no_open.closed and not no_open.well_formed


@pytest.mark.parametrize(
    ("response", "one_block", "ordered"),
    [
        ("<think>r</think>a", True, True),
        ("<think></think>a", True, True),  # an empty block is one block, in order
        ("<think>a</think><think>b</think>c", False, True),  # two blocks: in order only
        ("</think>x<think>", True, False),  # one of each, closer first
        ("a</think>b", False, False),
    ],
)
def test_parse_reads_both_halves_of_the_format(response, one_block, ordered):
    parsed = ChatFormat().parse(response)
    assert (parsed.one_block, parsed.ordered) == (one_block, ordered)


def test_parse_prompt_opens():
    fmt = ChatFormat(opener_in_prompt=True)
    parsed = fmt.parse("Okay, so 2+2=4.\n</think>\n\n\\boxed{4}")
    assert parsed.well_formed and parsed.reasoning == "Okay, so 2+2=4.\n"
    assert not fmt.parse("<think>x</think>y").well_formed
    assert fmt.answer_prefix("r") == "r</think>"


def test_probe_text_layout():
    fmt = ChatFormat()
    assert fmt.probe_text("So 4.") == f"<think>So 4.\n{AUX_PROMPT}</think>"
    assert fmt.probe_text("So 4.\n") == f"<think>So 4.\n{AUX_PROMPT}</think>"
    assert fmt.response_text("r", "a") == "<think>r</think>a"


class _Template:
    def __init__(self, suffix):
        self.chat_template = "stub"
        self.suffix = suffix

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        return f"<user>{messages[0]['content']}<assistant>{self.suffix}"


def test_reasoning_context_is_what_the_policy_read_before_the_reasoning():
    assert ChatFormat().reasoning_context("Q?") == "Q?<think>"
    assert ChatFormat(opener_in_prompt=True).reasoning_context("Q?<think>") == "Q?<think>"


def test_auto_detection_reads_the_template():
    assert resolve_chat_format("auto", tokenizer=_Template("<think>\n")).opener_in_prompt
    assert not resolve_chat_format("auto", tokenizer=_Template("")).opener_in_prompt
    assert resolve_chat_format("prompt-opens").opener_in_prompt
    custom = resolve_chat_format("response-opens", think_open="<reason>", think_close="</reason>")
    assert custom.parse("<reason>x</reason>y").well_formed


def test_bad_formats():
    with pytest.raises(TraacError, match="chat_format"):
        resolve_chat_format("qwen")
    with pytest.raises(TraacError, match="differ"):
        ChatFormat("<t>", "<t>")


class WordTokenizer:
    """One token per whitespace-separated word: enough to count think tokens."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(range(len(text.split())))}


def test_think_tokens():
    tok = WordTokenizer()
    assert think_tokens("<think> a b c </think> answer </think>", tok) == 4  # "<think> a b c"
    assert think_tokens("</think>x", tok) == 0
    assert think_tokens("<think> never closed", tok) is None
    assert think_tokens_from_ids([5, 6, 7, 9, 9], [9]) == 3
    assert think_tokens_from_ids([5, 8, 9, 8, 9], [8, 9]) == 1
    assert think_tokens_from_ids([5, 6], [9]) is None
