"""maj@k counted by the verifier's votes, end to end: `traac eval` of a held-out responses file
whose samples spell one answer several ways, against a hand count; the votes kept in the
summary, and `traac report` counting the same ones from samples.jsonl.

The file (files/maj_spellings_*.jsonl), four math problems of four samples each; "unclosed": the
think block never closed (no answer):

    a, gold -5:   7 | -5 | The answer is -5 | $-5$          (unboxed: last lines)
    b, gold 1/2:  \\boxed{2} | \\boxed{\\frac{1}{2}} | \\boxed{1/2} | \\boxed{0.5}
    c, gold 3:    unclosed | \\boxed{3} | unclosed | \\boxed{3.0}
    d, gold 10:   \\boxed{12} | \\boxed{10} | \\boxed{12.0} | \\boxed{\\frac{24}{2}}

Hand count by the verifier's groups (samples 0-3; R: the right group, W: a wrong one, -: no vote):

    a: W(7) R R R        b: W(2) R R R        c: - R - R        d: W(12) R W(12) W(12)
    maj@1: a 7 wrong, b 2 wrong, c no vote (wrong), d 12 wrong                     -> 0/4 =  0%
    maj@2: a 7:R tie -> 7 first, wrong; b wrong likewise; c R alone, right;
           d 12:10 tie -> 12 first, wrong                                          -> 1/4 = 25%
    maj@4: a R 3:1 right; b R 3:1 right; c R 2:0 right; d 12 three times, wrong    -> 3/4 = 75%

By answer strings (what maj@k counted before, as lighteval's MajAtN does), maj@4: a, b and d
have four different strings, a tie won by sample 0 (wrong); c's unclosed samples voted "" twice,
"3" and "3.0" once each: "" won (wrong). 0/4 = 0%. The string fallback kept for summaries
without votes no longer lets an empty answer vote: c then ties "3" with "3.0", "3" first
(right), 1/4 = 25%.
"""

import json
import shutil
from pathlib import Path

import pytest

from traac.evaluation.harness.metrics import sampling_stats
from traac.evaluation.harness.results import field_samples
from traac.evaluation.harness.runner import EvalSettings, read_summary, run_eval
from traac.evaluation.reports.report import load_models, sampling_groups

FILES = Path(__file__).parent / "files"


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    out = tmp_path_factory.mktemp("maj") / "run"
    settings = EvalSettings(
        dataset=str(FILES / "maj_spellings_problems.jsonl"),
        responses=str(FILES / "maj_spellings_responses.jsonl"),
    )
    return out, run_eval(settings, out)


def test_maj_at_k_is_the_hand_count(scored):
    _, result = scored
    s = result.summary.sampling
    assert s.avg == pytest.approx(100 * (3 + 3 + 2 + 1) / 16)
    assert s.maj_at[1] == pytest.approx(0.0)
    assert s.maj_at[2] == pytest.approx(25.0)
    assert s.maj_at[4] == pytest.approx(75.0)
    assert result.summary.votes == {
        "a": {0: 0, 1: 1, 2: 1, 3: 1},
        "b": {0: 0, 1: 1, 2: 1, 3: 1},
        "c": {0: None, 1: 1, 2: None, 3: 1},
        "d": {0: 0, 1: 1, 2: 0, 3: 0},
    }


def test_the_summary_keeps_the_votes_and_the_report_counts_them(scored):
    out, result = scored
    assert read_summary(out).votes == result.summary.votes
    assert "grouped by the item's verifier" in (out / "summary.md").read_text()
    groups, strings = sampling_groups(load_models([out]))
    assert strings == []
    (overall,) = [g for label, g in groups.items() if label.count(" · ") == 1]
    assert overall.maj_at == pytest.approx({1: 0.0, 2: 25.0, 4: 75.0})


def test_without_votes_maj_at_k_compares_strings_and_empty_answers_do_not_vote(scored):
    _, result = scored
    strings = sampling_stats(field_samples(result.records))
    assert strings.maj_at[4] == pytest.approx(25.0)


def test_a_summary_without_votes_is_named_and_counted_by_strings(scored, tmp_path):
    out, _ = scored
    old = tmp_path / "old"
    shutil.copytree(out, old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["votes"]  # as a summary written before the votes were kept
    (old / "summary.json").write_text(json.dumps(summary))
    groups, strings = sampling_groups(load_models([old]))
    assert strings == [str(old)]
    (overall,) = [g for label, g in groups.items() if label.count(" · ") == 1]
    assert overall.maj_at[4] == pytest.approx(25.0)
