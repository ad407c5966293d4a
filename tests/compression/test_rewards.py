import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traac.compression.difficulty import SINGLE_BIN, DifficultySettings
from traac.compression.formats import ChatFormat
from traac.compression.rewards import (
    LengthWindows,
    RewardSettings,
    format_reward,
    length_reward,
    score_rollouts,
    step_lengths,
)
from traac.errors import TraacError

PAPER = RewardSettings.preset("paper")
AUTHORS = RewardSettings.preset("authors")


def test_presets():
    assert (PAPER.correct, PAPER.format_count, PAPER.format_order, PAPER.length_weight) == (
        4,
        0.5,
        0.5,
        2,
    )
    assert (AUTHORS.format_count, AUTHORS.format_order, AUTHORS.length_weight) == (
        0.25,
        0.25,
        1,
    )
    assert RewardSettings.preset("authors", window_size=5).window_size == 5
    assert RewardSettings.preset("reference") == AUTHORS  # its old name, with a warning
    with pytest.raises(TraacError, match="unknown value 'verl'"):
        RewardSettings.preset("verl")
    with pytest.raises(TraacError, match=r"rewards\.length_weight"):
        RewardSettings(length_weight=-1)
    with pytest.raises(TraacError, match=r"rewards\.window_size"):
        RewardSettings(window_size=0)
    with pytest.raises(TraacError, match="unknown key"):
        RewardSettings.preset("paper", weight=3)


# --- format ---------------------------------------------------------------------------------------

RESPONSE_OPENS = ChatFormat()
PROMPT_OPENS = ChatFormat(opener_in_prompt=True)


@pytest.mark.parametrize(
    ("response", "paper", "authors"),
    [
        ("<think>reason</think>answer", 1.0, 0.5),
        ("<think>\n\n</think>answer", 1.0, 0.5),  # an empty block: a hybrid not thinking
        ("Sure. <think>reason</think>answer", 1.0, 0.5),  # text before the opener
        ("</think>reason<think>answer", 0.5, 0.25),  # one each, wrong order: count half
        ("<think>a</think><think>b</think>c", 0.5, 0.25),  # two blocks: order half only
        ("<think>a</think>b</think>", 0.5, 0.25),  # two closers, in order
        ("<think>a<think>b</think>", 0.5, 0.25),  # two openers, in order
        ("<think>never closed", 0.0, 0.0),
        ("plain answer", 0.0, 0.0),
    ],
)
def test_format_reward_response_opens(response, paper, authors):
    parsed = RESPONSE_OPENS.parse(response)
    assert format_reward(parsed, PAPER) == paper
    assert format_reward(parsed, AUTHORS) == authors


@pytest.mark.parametrize(
    "response",
    ["<think>r</think>a", "Sure. <think>r</think>a", "<think></think>a", "</think>r<think>",
     "<think>a</think><think>b</think>", "a</think>b", "<think>open"],
)  # fmt: skip
def test_compression_and_the_format_reward_read_one_parse(response):
    """A rollout is compressed exactly when it earns the full format reward
    (docs/method.md#step, #rewards)."""
    parsed = RESPONSE_OPENS.parse(response)
    assert parsed.well_formed == (format_reward(parsed, PAPER) == 1.0)


@pytest.mark.parametrize(
    ("response", "reward"),
    [
        ("Okay, so 2+2=4.\n</think>\n\\boxed{4}", 1.0),  # the prompt holds the opener
        ("\n</think>4", 1.0),  # an empty block
        ("<think>x</think>4", 0.5),  # an opener where the prompt already opened: order only
        ("no closer", 0.0),
    ],
)
def test_format_reward_prompt_opens(response, reward):
    assert format_reward(PROMPT_OPENS.parse(response), PAPER) == reward


# --- length ---------------------------------------------------------------------------------------


def test_length_reward_worked_example():
    window = [100, 200, 300]  # min 100, max 300, median 200
    # shortest: L_norm = 1
    assert length_reward(100, window, weight=2, scale=1.0) == pytest.approx(2.0)
    # median: L_norm = 0.5, beta = 1 / (1 + e^0) = 0.5
    assert length_reward(200, window, weight=2, scale=0.75) == pytest.approx(2 * 0.75 * 0.5)
    # longest: L_norm = 0, beta = 1 / (1 + e^((300 - 200) / 20)) = 1 / (1 + e^5)
    assert length_reward(300, window, weight=1, scale=0.5) == pytest.approx(0.5 / (1 + math.exp(5)))
    # 190: L_norm = 0.55, beta = 1 / (1 + e^-0.5) = 0.6225 wins
    assert length_reward(190, window, weight=1, scale=1) == pytest.approx(1 / (1 + math.exp(-0.5)))


def test_length_reward_edge_cases():
    assert length_reward(50, [], weight=2, scale=1) == 0.0
    # one length: max == min, L_norm = 0 for it, beta = 0.5 at the median
    assert length_reward(7, [7], weight=2, scale=1) == pytest.approx(1.0)
    # far longer than the window: no overflow, tends to 0
    assert length_reward(10**9, [10, 20], weight=2, scale=1) == pytest.approx(0.0)
    # all-zero window: median 0 guarded by eps
    assert 0 <= length_reward(0, [0, 0], weight=2, scale=1) <= 2


@given(
    st.integers(0, 20_000),
    st.lists(st.integers(0, 20_000), min_size=1, max_size=50),
    st.sampled_from([1.0, 2.0]),
    st.sampled_from([1.0, 0.75, 0.5]),
)
def test_length_reward_is_within_zero_and_w(length, window, weight, scale):
    r = length_reward(length, window, weight=weight, scale=scale)
    assert 0.0 <= r <= weight * scale + 1e-12


@given(st.lists(st.integers(1, 10_000), min_size=2, max_size=30), st.integers(1, 10_000))
def test_length_reward_never_rewards_longer_more(window, length):
    shorter = length_reward(length, window, weight=1, scale=1)
    longer = length_reward(length + 1, window, weight=1, scale=1)
    assert longer <= shorter + 1e-12


# --- windows --------------------------------------------------------------------------------------


def test_windows_drop_the_eleventh_oldest_step():
    windows = LengthWindows(10)
    key = ("math", "easy")
    for step in range(11):
        windows.push_step({key: [step * 100]})
    assert windows.window(key) == [step * 100 for step in range(1, 11)]


def test_absent_keys_age_and_vanish():
    windows = LengthWindows(3)
    windows.push_step({("a", "easy"): [5, 6]})
    windows.push_step({("a", "hard"): [9]})
    assert windows.window(("a", "easy")) == [5, 6]
    windows.push_step({})
    windows.push_step({})
    assert windows.window(("a", "easy")) == [] and windows.keys() == [("a", "hard")]
    windows.push_step({})
    assert windows.keys() == []


def test_state_dict_round_trip_through_json():
    windows = LengthWindows(4)
    windows.push_step({("math", "easy"): [1, 2], ("gsm", "hard"): [3]})
    windows.push_step({("math", "easy"): [4]})
    state = json.loads(json.dumps(windows.state_dict()))
    restored = LengthWindows()
    restored.load_state_dict(state)
    assert restored.size == 4 and restored.keys() == windows.keys()
    assert restored.window(("math", "easy")) == [1, 2, 4]
    with pytest.raises(TraacError, match="malformed state"):
        restored.load_state_dict({"windows": []})


def test_merge_gives_every_process_the_same_step():
    """What accelerate's gather_object returns on every process: all contributions, in order."""
    rank0 = step_lengths([True, False, True], [10, 20, 30], [("m", "easy")] * 3)
    rank1 = step_lengths([True, True], [40, 50], [("m", "easy"), ("m", "hard")])
    gathered = [rank0, rank1]
    replicas = [LengthWindows(), LengthWindows()]
    for windows in replicas:
        windows.push_step(LengthWindows.merge(gathered))
    assert replicas[0].state_dict() == replicas[1].state_dict()
    assert replicas[0].window(("m", "easy")) == [10, 30, 40]
    assert replicas[0].window(("m", "hard")) == [50]


# --- a whole step -------------------------------------------------------------------------------


def test_score_rollouts_worked_example():
    responses = ["<think>r</think>a"] * 3 + ["<think>r</think>b</think>"]
    correct = [True, True, False, True]
    lengths = [100, 300, 50, 200]
    keys = [("math", "easy")] * 3 + [("math", "hard")]
    windows = LengthWindows()
    out = score_rollouts(
        [RESPONSE_OPENS.parse(r) for r in responses],
        correct,
        lengths,
        keys,
        config=PAPER,
        windows=windows,
        difficulty=DifficultySettings(),
    )
    assert out.correctness == [4.0, 4.0, 0.0, 4.0]
    assert out.format == [1.0, 1.0, 1.0, 0.5]  # two closers: the order half only
    # easy window [100, 300]: 100 gets W * 1.0 * 1; 300 gets 2 * beta(300; median 200) = 2/(1+e^5)
    # the wrong rollout gets nothing; the hard window [200] gives 2 * 0.5 * 0.5
    assert out.length == pytest.approx([2.0, 2 / (1 + math.exp(5)), 0.0, 0.5])
    assert out.total == pytest.approx([7.0, 5.0 + 2 / (1 + math.exp(5)), 1.0, 5.0])
    assert windows.window(("math", "easy")) == [100, 300]


def test_score_rollouts_uses_gather_and_ablations():
    seen = []

    def gather(local):
        seen.append(local)
        return [*local, {("math", SINGLE_BIN): [1000]}]  # another process's contribution

    windows = LengthWindows()
    out = score_rollouts(
        [RESPONSE_OPENS.parse("<think>r</think>a")],
        [True],
        [100],
        [("math", SINGLE_BIN)],
        config=AUTHORS,
        windows=windows,
        difficulty=DifficultySettings(enabled=False),
        gather=gather,
    )
    assert seen == [[{("math", SINGLE_BIN): [100]}]]
    assert windows.window(("math", SINGLE_BIN)) == [100, 1000]
    assert out.length == [1.0] and out.format == [0.5]
    only_cr = RewardSettings(use_format=False, use_length=False)
    out = score_rollouts(
        [RESPONSE_OPENS.parse("x")],
        [True],
        [5],
        [("m", "easy")],
        config=only_cr,
        windows=windows,
        difficulty=DifficultySettings(),
    )
    assert out.total == [4.0]
    with pytest.raises(TraacError, match="one each per rollout"):
        score_rollouts(
            [RESPONSE_OPENS.parse("x")],
            [],
            [1],
            [("m", "easy")],
            config=PAPER,
            windows=windows,
            difficulty=DifficultySettings(),
        )


def test_the_method_package_needs_no_trl():
    """traac.compression is the pure algorithm (numpy/torch): DAPO's TRL function is composed in
    traac.training, so importing every method module must not load TRL."""
    code = (
        "import importlib, pkgutil, sys, traac.compression as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    importlib.import_module(f'traac.compression.{info.name}')\n"
        "assert 'trl' not in sys.modules, 'trl imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
