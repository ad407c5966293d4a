"""traac's pass@k, maj@k and avg@k against lighteval's own `PassAtK`, `MajAtN` and `AvgAtN`, on
the crafted problems of tests/evaluation/test_metrics.py and on every small case: pass@k for all
n <= 16, c <= n, k <= n, and maj@k / avg@k for every answer list of length 1 to 6 over a
three-answer alphabet (gold "1"; an answer is right iff it is the gold, so lighteval's exact
match and traac's verifier verdict agree on what is right). Counts and the largest difference.

maj@k is compared where the two rules must agree: every answer present and each value spelt one
way, so traac's votes (the verifier's groups, `traac.verification.votes`) are the answer strings.
Elsewhere traac departs from lighteval's `MajAtN` by design: lighteval counts `1/2` and `0.5` as
two answers and lets an empty answer vote; traac counts one answer and no vote
(docs/evaluation.md). This script checks the counting and the tie rule, not that departure
(tests/evaluation/harness/test_votes.py checks it against a hand count).

lighteval is not a traac dependency (it pins torch, transformers, nltk ... of its own): run this
with a separate environment that has it, e.g. a venv holding `lighteval` whose site-packages also
see traac's environment (a .pth line naming it):

    PYTHONPATH=src /work/venvs/lighteval/bin/python benchmarks/lighteval_agreement.py
"""

from __future__ import annotations

import itertools
import math
import platform
from importlib import metadata

from lighteval.metrics.metrics_sample import AvgAtN, MajAtN, PassAtK
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.requests import Doc

from traac.evaluation.harness.metrics import Sample, pass_at_k, sampling_stats, string_vote

GOLD = "1"
ALPHABET = ("1", "2", "3")


def doc() -> Doc:
    return Doc(query="q", choices=[GOLD], gold_index=0)


def lighteval_pass(n: int, c: int, k: int) -> float:
    metric = PassAtK(k=k, n=n, strip_strings=True)
    answers = [GOLD] * c + ["0"] * (n - c)
    return float(metric.compute(doc(), ModelResponse(text=answers)))


def lighteval_maj(answers: list[str], k: int) -> float:
    metric = MajAtN(n=k, strip_strings=True)
    return float(metric.compute(doc(), ModelResponse(text=answers)))


def lighteval_avg(answers: list[str]) -> float:
    metric = AvgAtN(n=len(answers), strip_strings=True)
    return float(metric.compute(doc(), ModelResponse(text=answers)))


def traac_stats(answers: list[str]):
    samples = [
        Sample("p", i, a.strip() == GOLD, string_vote(a), 1, 1, True, None)
        for i, a in enumerate(answers)
    ]
    return sampling_stats(samples, ks=range(1, len(answers) + 1))


def main() -> None:
    print(
        f"lighteval {metadata.version('lighteval')}, traac from PYTHONPATH, "
        f"python {platform.python_version()}"
    )
    worst, cases = 0.0, 0
    for n in range(1, 17):
        for c, k in itertools.product(range(n + 1), range(1, n + 1)):
            ours, theirs = pass_at_k(n, c, k), lighteval_pass(n, c, k)
            exact = 1 - math.comb(n - c, k) / math.comb(n, k)
            worst = max(worst, abs(ours - theirs), abs(ours - exact))
            cases += 1
    print(f"pass@k: {cases} (n, c, k) cases, n <= 16; largest |traac - lighteval| {worst:.2e}")

    # The crafted problems of the unit tests (gold 4 / 1 / 9 there; here each answer list is
    # recoded so its gold is "1").
    crafted = {
        "p": ["5", "1", "5", "1"],  # two right; 5 and 1 tie, 5 first
        "q": ["1", "2", "2", "3"],  # one right; 2 wins
        "r": ["1"] * 4,
    }
    for name, answers in crafted.items():
        ours = traac_stats(answers)
        for k in (1, 2, 4):
            theirs_maj = lighteval_maj(answers, k)
            theirs_pass = lighteval_pass(4, answers.count("1"), k)
            print(
                f"crafted {name} k={k}: maj traac {ours.maj_at[k] / 100:.4f} lighteval "
                f"{theirs_maj:.4f}; pass traac {ours.pass_at[k] / 100:.4f} lighteval "
                f"{theirs_pass:.4f}"
            )

    maj_cases = maj_diff = avg_diff = 0
    for length in range(1, 7):
        for answers in itertools.product(ALPHABET, repeat=length):
            answers = list(answers)
            ours = traac_stats(answers)
            for k in range(1, length + 1):
                maj_cases += 1
                maj_diff += ours.maj_at[k] / 100 != lighteval_maj(answers, k)
            avg_diff += abs(ours.avg / 100 - lighteval_avg(answers)) > 1e-12
    print(
        f"maj@k: {maj_cases} (answers, k) cases over {{1,2,3}}^1..6; disagreements {maj_diff}; "
        f"avg@k disagreements {avg_diff}"
    )


if __name__ == "__main__":
    main()
