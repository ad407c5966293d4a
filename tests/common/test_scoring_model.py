"""The scoring model, said one way: reference, policy, or a foreign model with its tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from traac.common.scoring_model import (
    POLICY,
    REFERENCE,
    ScoringModel,
    check_scoring_model,
    is_foreign,
    names_policy,
    names_reference,
    resolve_scoring_model,
)
from traac.errors import TraacError


def test_the_policy_and_the_reference_score_with_the_policys_tokenizer() -> None:
    for name in (None, POLICY, REFERENCE):
        assert resolve_scoring_model(name) == ScoringModel()
        assert not resolve_scoring_model(name).foreign


def test_each_name_is_asked_one_way() -> None:
    """What the trainer and the memory plan ask of a `scoring_model`, never its string."""
    asked = {name: (names_policy(name), names_reference(name), is_foreign(name))
             for name in (None, POLICY, REFERENCE, "testbed-quick")}  # fmt: skip
    assert asked == {
        None: (False, False, False),
        POLICY: (True, False, False),
        REFERENCE: (False, True, False),
        "testbed-quick": (False, False, True),
    }


def test_a_named_model_resolves_as_model_does_and_brings_its_tokenizer(
    quick_testbed: Path,
) -> None:
    scorer = resolve_scoring_model("testbed-quick")
    assert scorer.foreign and Path(scorer.path) == quick_testbed
    assert scorer.tokenizer.pad_token is not None  # loaded as every command loads one
    # A command's own model named again scores on policy.
    assert resolve_scoring_model("testbed-quick", policy_path=scorer.path) == ScoringModel()


def test_a_bad_name_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraacError, match="no-such-model"):
        resolve_scoring_model(str(tmp_path / "no-such-model"))


@pytest.mark.parametrize(
    ("name", "scorer", "message"),
    [
        (" ", "attention", "scoring_model: ' ' is empty"),
        ("smollm2", "confidence", "scoring_model: 'smollm2' with scorer confidence"),
    ],
)
def test_the_one_check(name: str, scorer: str, message: str) -> None:
    with pytest.raises(TraacError, match=f"^{message}"):
        check_scoring_model(name, scorer, reads_policy=scorer == "confidence")
    check_scoring_model(POLICY, "confidence", reads_policy=True)  # the policy's own: fine
    check_scoring_model(None, "confidence", reads_policy=True)  # unset on a command: --model
    check_scoring_model("smollm2", "attention")


def test_a_command_names_its_flag() -> None:
    with pytest.raises(TraacError, match=r"^--scoring-model: 'x' with scorer confidence"):
        check_scoring_model("x", "confidence", "--scoring-model", reads_policy=True)
