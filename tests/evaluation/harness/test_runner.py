"""traac eval: scoring responses files, generation with a tiny random model, resumability.

A random Qwen3 of two layers and a 300-token byte-level tokenizer stand in for a real model:
their output is garbage, which is fine for counts, files and resumption (not for accuracy).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock
from transformers import AutoTokenizer

from traac.compression.formats import AUX_PROMPT
from traac.errors import TraacError
from traac.evaluation.harness.prompts import THINK_INSTRUCTION
from traac.evaluation.harness.results import SampleRecord, summarize
from traac.evaluation.harness.runner import (
    EvalSettings,
    SamplesFile,
    read_summary,
    run_eval,
    run_lock,
)
from traac.evaluation.inference.responses import Generation

REPO = Path(__file__).resolve().parents[3]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def make_model_dir(tmp_path, save_tiny):
    """Factory: a random two-layer Qwen3 and its byte-level BPE tokenizer with think tags and
    ChatML, saved in a directory; `config` adds config.json fields."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    def make(name: str = "tiny-model", **config) -> Path:
        tok = byte_level_tokenizer()
        ids = {"eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
        return save_tiny(tmp_path / name, tok, **TWO_LAYERS, **ids, **config)

    def byte_level_tokenizer() -> PreTrainedTokenizerFast:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(["What is 2 + 3? Let's think step by step \\boxed{5}"] * 4, trainer)
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
        )
        fast.chat_template = CHATML
        return fast

    return make


TWO_LAYERS = {
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
}


@pytest.fixture
def model_dir(make_model_dir) -> Path:
    return make_model_dir()


@pytest.fixture
def tokenizer(model_dir):
    from traac.common.models import load_tokenizer

    return load_tokenizer(str(model_dir))


@pytest.fixture
def dataset(tmp_path) -> Path:
    """Math (distinct answers, two tiers), multiple choice and free text."""
    rows = [
        {"id": f"m{k}", "question": f"What is {k} + {k}?", "answer": str(2 * k), "difficulty": tier}
        for k, tier in zip(
            range(1, 7), ["easy", "easy", "easy", "hard", "hard", "hard"], strict=True
        )
    ]
    rows.append(
        {"id": "c1", "question": "Pick the vowel", "choices": ["b", "e", "k"], "answer": "e"}
    )
    rows.append(
        {"id": "t1", "question": "Capital of France?", "answer": "Paris", "verifier": "text"}
    )
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def response(answer: str, think: str = "Let me add the numbers.") -> str:
    return f"<think>\n{think}\n</think>\n\nThe answer is \\boxed{{{answer}}}."


def write_responses(path: Path, answers: dict[str, str], samples: int = 1) -> Path:
    with open(path, "w") as f:
        for item_id, answer in answers.items():
            for s in range(samples):
                f.write(
                    json.dumps({"id": item_id, "sample": s, "response": response(answer)}) + "\n"
                )
    return path


GOLD = {**{f"m{k}": str(2 * k) for k in range(1, 7)}, "c1": "B", "t1": "Paris"}


def score(dataset: Path, responses: Path, out: Path, **kwargs):
    settings = EvalSettings(dataset=str(dataset), responses=str(responses))
    return run_eval(settings, out, **kwargs)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------------------------
# Scoring responses files


def test_oracle_responses_score_100_and_shuffled_score_0(tmp_path, dataset):
    oracle = score(
        dataset, write_responses(tmp_path / "oracle.jsonl", GOLD, samples=2), tmp_path / "o"
    )
    ids = list(GOLD)
    shuffled_answers = {i: GOLD[ids[(k + 1) % len(ids)]] for k, i in enumerate(ids)}
    shuffled = score(
        dataset, write_responses(tmp_path / "shuf.jsonl", shuffled_answers), tmp_path / "s"
    )
    assert oracle.summary.overall.accuracy == 100.0
    assert oracle.summary.overall.n_samples == 16 and oracle.summary.overall.n_items == 8
    assert shuffled.summary.overall.accuracy == 0.0
    assert all(isinstance(r, SampleRecord) for r in oracle.records)
    records = lines(tmp_path / "o" / "samples.jsonl")
    first = records[0]
    assert set(first) >= {"id", "sample", "prompt", "response", "response_tokens", "think_tokens"}
    assert (first["closed"], first["extracted"], first["correct"], first["difficulty"]) == (
        True,
        "2",
        True,
        "easy",
    )
    assert first["think_tokens"] == len(["<think>", "Let", "me", "add", "the", "numbers."])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["overall"]["accuracy"] == 100.0 and summary["overall"]["n_samples"] == 16
    assert set(summary["by_difficulty"]) == {"easy", "hard"}
    assert summary["length_unit"].startswith("whitespace")
    assert read_summary(tmp_path / "o") == oracle.summary  # what reports read back
    assert "| all | 8 | 16 | 100.00 |" in (tmp_path / "o" / "summary.md").read_text()


def test_responses_are_counted_in_a_tokenizer_when_given(tmp_path, dataset, tokenizer):
    settings = EvalSettings(
        dataset=str(dataset), responses=str(write_responses(tmp_path / "r.jsonl", GOLD))
    )
    result = run_eval(settings, tmp_path / "out", tokenizer=tokenizer)
    record = result.records[0]
    think = "<think>\nLet me add the numbers.\n"
    assert record.think_tokens == len(tokenizer.encode(think, add_special_tokens=False))
    assert record.response_tokens == len(tokenizer.encode(response("2"), add_special_tokens=False))
    assert result.summary.length_unit.startswith("tokens")
    # a copy of the tokenizer saved elsewhere (as a LoRA adapter keeps one) is the same unit
    tokenizer.save_pretrained(tmp_path / "adapter")
    copy = AutoTokenizer.from_pretrained(tmp_path / "adapter")
    again = run_eval(settings, tmp_path / "copy", tokenizer=copy)
    assert again.summary.tokenizer_id == result.summary.tokenizer_id is not None
    assert again.summary.length_unit != result.summary.length_unit  # named by its directory
    copy.add_tokens(["numbers"])  # a different vocabulary counts in other tokens
    other = run_eval(settings, tmp_path / "other", tokenizer=copy)
    assert other.summary.tokenizer_id != result.summary.tokenizer_id
    assert read_summary(tmp_path / "copy") == again.summary


def test_responses_file_problems_are_clear_errors(tmp_path, dataset):
    unknown = write_responses(tmp_path / "unknown.jsonl", {**GOLD, "zz": "1"})
    with pytest.raises(TraacError, match="1 id\\(s\\) are not in the dataset \\(first: 'zz'\\)"):
        score(dataset, unknown, tmp_path / "a")
    partial = write_responses(tmp_path / "partial.jsonl", {"m1": "2"})
    with pytest.raises(TraacError, match="no response for 7 of 8 items"):
        score(dataset, partial, tmp_path / "b")
    assert score(dataset, partial, tmp_path / "c", limit=1).summary.overall.accuracy == 100.0
    repeated = tmp_path / "repeated.jsonl"
    repeated.write_text((json.dumps({"id": "m1", "sample": 0, "response": "x"}) + "\n") * 2)
    with pytest.raises(TraacError, match="line 2 repeats id 'm1' sample 0"):
        score(dataset, repeated, tmp_path / "d", limit=1)


def test_a_torn_last_line_is_redone_and_nothing_is_duplicated(tmp_path, dataset):
    responses = write_responses(tmp_path / "r.jsonl", GOLD, samples=2)
    out = tmp_path / "out"
    score(dataset, responses, out)
    samples = out / "samples.jsonl"
    data = samples.read_bytes()
    samples.write_bytes(data[: len(data) - 25])  # the last record loses its end
    rerun = score(dataset, responses, out)
    assert (rerun.done_before, rerun.new) == (15, 1)
    keys = [(r["id"], r["sample"]) for r in lines(samples)]
    assert len(keys) == len(set(keys)) == 16
    assert samples.read_bytes() == data  # redone exactly as before
    samples.write_text("not json\n" + samples.read_text())
    with pytest.raises(TraacError, match="line 1 is not a sample record"):
        score(dataset, responses, out)


def test_other_settings_into_the_same_directory_are_refused(tmp_path, dataset):
    responses = write_responses(tmp_path / "r.jsonl", GOLD)
    score(dataset, responses, tmp_path / "out")
    other = EvalSettings(dataset=str(dataset), responses=str(responses), max_new_tokens=500)
    with pytest.raises(TraacError, match="max_new_tokens: 10000 -> 500"):
        run_eval(other, tmp_path / "out")
    # A run that fails before starting leaves no run.json behind to block the next one.
    missing = EvalSettings(dataset=str(tmp_path / "nope.jsonl"), responses=str(responses))
    with pytest.raises(TraacError, match="no such file"):
        run_eval(missing, tmp_path / "fresh")
    assert not (tmp_path / "fresh" / "run.json").exists()
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "samples.jsonl").write_text("")
    with pytest.raises(TraacError, match=r"no run\.json"):
        run_eval(EvalSettings(dataset=str(dataset), responses=str(responses)), stray)


# --------------------------------------------------------------------------------------------
# Generation and resumption


class FlakyBackend:
    """Answers every prompt right after a short think; raises on batch `fail_at` (an interrupt)."""

    max_context = None

    def __init__(self, tokenizer, answers: dict[str, str], fail_at: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.answers = answers
        self.fail_at = fail_at
        self.batches = 0
        self.budgets: list[int] = []

    def generate(self, prompts, sampling, keys, on_tokens=None):
        self.budgets.append(sampling.max_new_tokens)
        self.batches += 1
        if self.batches == self.fail_at:
            raise KeyboardInterrupt
        out = []
        for key in keys:
            text = response(self.answers[key.split("#")[0]])
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            gen = Generation(text, tuple(ids), "stop", extra={"backend_key": key})
            out.append(gen)
        return out


def test_an_interrupted_generation_loses_nothing_and_resumes(tmp_path, dataset, tokenizer):
    settings = EvalSettings(dataset=str(dataset), model="fake")
    out = tmp_path / "out"
    flaky = FlakyBackend(tokenizer, GOLD, fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        run_eval(
            settings,
            out,
            num_samples=3,
            batch_size=5,
            tokenizer=tokenizer,
            make_backend=lambda t: flaky,
        )
    assert len(lines(out / "samples.jsonl")) == 10  # two whole batches were kept
    steady = FlakyBackend(tokenizer, GOLD)
    result = run_eval(
        settings,
        out,
        num_samples=3,
        batch_size=5,
        tokenizer=tokenizer,
        make_backend=lambda t: steady,
    )
    assert (result.done_before, result.new) == (10, 14)
    keys = [(r["id"], r["sample"]) for r in lines(out / "samples.jsonl")]
    assert len(keys) == len(set(keys)) == 24
    assert result.summary.overall.accuracy == 100.0
    assert lines(out / "samples.jsonl")[0]["backend_key"] == "m1#0"  # a backend's extra fields
    # More samples later: only the new ones are generated.
    more = run_eval(
        settings,
        out,
        num_samples=4,
        batch_size=5,
        tokenizer=tokenizer,
        make_backend=lambda t: steady,
    )
    assert (more.new, more.summary.overall.n_samples) == (8, 32)
    assert more.summary.accuracy_by_sample == {0: 100.0, 1: 100.0, 2: 100.0, 3: 100.0}


def test_budgets_beyond_the_context_are_capped_and_noted(tmp_path, dataset, tokenizer):
    from traac.common.items import Item
    from traac.evaluation.harness.prompts import build_prompt

    questions = [f"What is {k} + {k}?" for k in range(1, 7)]  # the first six items: one batch
    longest = max(
        len(tokenizer.encode(build_prompt(Item(id="x", question=q, answer="1"), tokenizer)))
        for q in questions
    )
    backend = FlakyBackend(tokenizer, GOLD)
    backend.max_context = longest + 5
    settings = EvalSettings(dataset=str(dataset), model="fake", max_new_tokens=100)
    result = run_eval(
        settings,
        tmp_path / "out",
        num_samples=1,
        limit=6,
        tokenizer=tokenizer,
        make_backend=lambda t: backend,
    )
    assert backend.budgets == [5]
    assert "capped at 5-5 new tokens" in result.summary.notes[0]


def test_traac_eval_generates_with_a_model_dir(tmp_path, dataset, model_dir, capsys):
    from traac.commands.eval import main

    out = tmp_path / "run"
    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out)]
    argv += ["--num-samples", "2", "--max-new-tokens", "6", "--batch-size", "4", "--limit", "3"]
    assert main(argv) == 0
    assert re.search(r"\ball +│ +3 │ +6 │", capsys.readouterr().out)  # the table, drawn
    records = lines(out / "samples.jsonl")
    assert [(r["id"], r["sample"]) for r in records] == [
        (f"m{k}", s) for k in (1, 2, 3) for s in (0, 1)
    ]
    for r in records:
        assert r["prompt"].endswith("<|im_start|>assistant\n")
        assert 1 <= r["response_tokens"] <= 6 and r["finish_reason"] in ("stop", "length")
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["max_new_tokens"] == 6 and run["args"]["batch_size"] == 4
    # The config names no style and the chat template opens no think block: ask for one.
    assert run["settings"]["prompt_style"] == "think"
    assert all(THINK_INSTRUCTION in r["prompt"] for r in records)
    assert main(argv) == 0  # a rerun finds everything done
    assert lines(out / "samples.jsonl") == records
    with pytest.raises(TraacError, match=r"temperature: 1\.0 -> 0\.5"):
        main([*argv, "--temperature", "0.5"])


# Runs `traac eval` with `SamplesFile.append` wrapped: once the file holds STOP_AT lines the
# process stops itself (SIGSTOP) right after that fsync, so the test kills it at a point it
# chose, however fast the machine writes samples.
STOPPING_EVAL = """
import os, signal, sys
from traac.cli import main
from traac.evaluation.harness.samples import SamplesFile

append = SamplesFile.append

def append_then_stop(self, records):
    append(self, records)
    if self.path.read_text().count("\\n") >= int(os.environ["STOP_AT"]):
        os.kill(os.getpid(), signal.SIGSTOP)

SamplesFile.append = append_then_stop
sys.exit(main(["eval", *sys.argv[1:]]))
"""


def wait_until_stopped(proc: subprocess.Popen, limit_s: float = 300) -> None:
    """Block until `proc` stops itself; a run that ends or hangs instead fails the test (the
    limit only bounds a hang: how fast the run gets there does not matter)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        pid, status = os.waitpid(proc.pid, os.WNOHANG | os.WUNTRACED)
        if pid:
            assert os.WIFSTOPPED(status), f"the run ended (status {status}) instead of stopping"
            return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the run neither stopped nor ended in {limit_s} s")


def test_killing_traac_eval_midway_then_rerunning_completes_it(tmp_path, dataset, model_dir):
    out = tmp_path / "run"
    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out)]
    argv += ["--num-samples", "4", "--max-new-tokens", "4", "--batch-size", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "STOP_AT": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPING_EVAL, *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until_stopped(proc)
    os.kill(proc.pid, signal.SIGKILL)  # midway: stopped after a write, the run unfinished
    assert proc.wait() == -signal.SIGKILL
    samples = out / "samples.jsonl"
    before = lines(samples)
    assert 3 <= len(before) < 32
    with open(samples, "a") as f:
        f.write('{"id": "m9", "sample": 0, "resp')  # what a kill during a write leaves
    from traac.commands.eval import main

    assert main(argv) == 0
    keys = [(r["id"], r["sample"]) for r in lines(samples)]
    assert len(keys) == len(set(keys)) == 32
    assert lines(samples)[: len(before)] == before  # what the killed run wrote is kept as is


# --------------------------------------------------------------------------------------------
# Summary


def record(item_id, correct, think, closed=True, source="x", sample=0) -> SampleRecord:
    """A record as the runner writes it: a response that never closed is all thinking."""
    return SampleRecord(
        id=item_id,
        sample=sample,
        response="",
        correct=correct,
        response_tokens=think + 10 if closed else think,
        think_tokens=think,
        closed=closed,
        data_source=source,
    )


def test_summary_auc_oaa_and_otb_f1():
    over = [
        record("o1", True, 0, source="otb-overthink"),
        record("o2", True, 500, source="otb-overthink"),
        record("o3", True, 900, closed=False, source="otb-overthink"),  # never closed: counts 0
        record("o4", False, 10, source="otb-overthink"),
    ]
    under = [
        record("u1", True, 100, source="otb-underthink"),
        record("u2", False, 100, source="otb-underthink"),
    ]
    summary = summarize(over + under, dataset="otb", model="m", t_max=1000, length_unit="tokens")
    auc = 100 * (1.0 + 0.5) / 4
    assert summary.by_source["otb-overthink"].auc_oaa == pytest.approx(auc)
    assert summary.otb.underthink == pytest.approx(50.0) and summary.otb.scoring == "paper"
    assert summary.otb.f1 == pytest.approx(2 * auc * 50 / (auc + 50))
    assert summary.overall.mean_think_tokens == pytest.approx((0 + 500 + 900 + 10 + 100 + 100) / 6)


def test_sample_records_round_trip_with_their_extra_fields():
    rec = SampleRecord(
        id="m1", sample=2, response="r", correct=True, response_tokens=5, think_tokens=3,
        closed=False, tier="easy", extra={"ttc_tokens_saved": 4},
    )  # fmt: skip
    row = rec.to_json()
    assert row["ttc_tokens_saved"] == 4 and "extra" not in row  # written flat
    assert SampleRecord.from_json(row) == rec
    assert rec.key == ("m1", 2) and rec.think_or_none is None  # never closed: no think length
    with pytest.raises(TypeError):
        SampleRecord.from_json({"id": "m1", "sample": "0"})


def test_reading_samples_repairs_nothing_loading_them_cuts_a_torn_tail(tmp_path):
    store = SamplesFile(tmp_path / "samples.jsonl")
    store.append([record("a", True, 3), record("b", False, 4)])
    whole = store.path.read_bytes()
    store.path.write_bytes(whole + b'{"id": "c", "sam')
    assert list(store.read()) == [("a", 0), ("b", 0)]
    assert store.path.read_bytes() == whole + b'{"id": "c", "sam'  # read() leaves it
    assert store.load() == {r.key: r for r in (record("a", True, 3), record("b", False, 4))}
    assert store.path.read_bytes() == whole  # load() cut the torn line


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": math.nan}, "--temperature nan"),
        ({"temperature": -1.0}, "--temperature -1.0"),
        ({"top_p": 0.0}, "--top-p 0.0"),
        ({"top_p": math.nan}, "--top-p nan"),
        ({"max_new_tokens": 0}, "--max-new-tokens 0"),
        ({"prompt_style": "fancy"}, "prompt style 'fancy'"),
        ({"responses": "r.jsonl"}, "exactly one"),
    ],
)
def test_eval_settings_check_themselves(fields, message):
    with pytest.raises(TraacError, match=re.escape(message)):
        EvalSettings(dataset="testbed:easy", model="m", **fields)


def test_test_time_compression_needs_a_model():
    with pytest.raises(TraacError, match="--compress-tau needs --model"):
        EvalSettings(dataset="testbed:easy", responses="r.jsonl", compress_tau=0.4)


def test_traac_eval_with_test_time_compression_records_tokens_saved(tmp_path, dataset, model_dir):
    from traac.commands.eval import main

    out = tmp_path / "ttc"
    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out)]
    argv += ["--num-samples", "1", "--max-new-tokens", "8", "--limit", "2"]
    assert main([*argv, "--compress-tau", "0.4", "--uniformity-gate", "0.9"]) == 0
    records = lines(out / "samples.jsonl")
    assert len(records) == 2
    for r in records:
        assert "ttc_tokens_saved" in r and r["ttc_tokens_saved"] >= 0
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["compress_tau"] == 0.4
    assert run["settings"]["compression"]["uniformity_gate"] == 0.9  # what a sample depends on
    with pytest.raises(TraacError, match="compress_tau"):
        main(argv)  # the same directory without compression is another run
    with pytest.raises(TraacError, match=r"--compress-tau 1\.5: must lie in \[0, 1\]"):
        main([*argv, "--compress-tau", "1.5", "--output", str(tmp_path / "bad")])
    with pytest.raises(TraacError, match=r"uniformity_gate: 1\.5 must be a number in \[0, 1\]"):
        main([*argv, "--compress-tau", "0.4", "--uniformity_gate", "1.5"])


def test_the_prompt_style_a_model_was_trained_with_is_its_default(
    tmp_path, dataset, make_model_dir
):
    from traac.commands.eval import main

    taught = make_model_dir("taught", traac_prompt_style="question")
    argv = ["--model", str(taught), "--dataset", str(dataset), "--num-samples", "1"]
    argv += ["--max-new-tokens", "2", "--limit", "1"]
    chatml = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    assert main([*argv, "--output", str(tmp_path / "own")]) == 0
    (own,) = lines(tmp_path / "own" / "samples.jsonl")
    assert own["prompt"] == chatml.format("What is 1 + 1?")  # the question alone
    run = json.loads((tmp_path / "own" / "run.json").read_text())
    assert run["settings"]["prompt_style"] == "question"
    assert main([*argv, "--output", str(tmp_path / "base"), "--prompt-style", "base"]) == 0
    (told,) = lines(tmp_path / "base" / "samples.jsonl")
    assert told["prompt"] == chatml.format(
        "What is 1 + 1? Let's think step by step and output the final answer within \\boxed{}"
    )


def test_traac_eval_with_a_think_budget_records_the_interruptions(tmp_path, dataset, model_dir):
    from traac.commands.eval import main

    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--num-samples", "2"]
    argv += ["--max-new-tokens", "12", "--limit", "2"]
    for tau in (None, "0.4"):
        out = tmp_path / f"budget-{tau}"
        extra = ["--think-budget", "3", *(["--compress-tau", tau] if tau else [])]
        assert main([*argv, "--output", str(out), *extra]) == 0
        records = lines(out / "samples.jsonl")
        assert len(records) == 4
        for r in records:
            assert 1 <= r["budget_think_tokens"] <= 3 and isinstance(r["interrupted"], bool)
            if r["interrupted"]:
                assert r["budget_think_tokens"] == 3
                assert f"{AUX_PROMPT}</think>" in r["response"]
            assert ("ttc_tokens_saved" in r) == (tau is not None)
        run = json.loads((out / "run.json").read_text())["settings"]
        assert run["think_budget"] == 3 and run["compress_tau"] == (0.4 if tau else None)
        summary = json.loads((out / "summary.json").read_text())
        share = 100 * sum(r["interrupted"] for r in records) / 4
        assert summary["interrupted_rate"] == pytest.approx(share)
    with pytest.raises(TraacError, match="think_budget"):
        main([*argv, "--output", str(tmp_path / "budget-None")])  # another run's directory


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--think-budget", "0"], "--think-budget 0: must be at least 1"),
        (["--think-budget", "8", "--max-model-len", "64"], "--max-model-len sets the vLLM"),
    ],
)
def test_a_bad_think_budget_fails_before_the_model_loads(
    tmp_path, dataset, model_dir, monkeypatch, extra, message
):
    from traac.commands.eval import main

    monkeypatch.setattr("traac.common.models.load_model", lambda *a, **k: pytest.fail("loaded"))
    argv = ["--model", str(model_dir), "--dataset", str(dataset)]
    with pytest.raises(TraacError, match=re.escape(message)) as err:
        main([*argv, "--output", str(tmp_path / "out"), *extra])
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------------------------
# Careless input: one line, nothing blocked, nothing lost


@pytest.mark.parametrize(
    "bad",
    [
        ["--temperature", "-1"],
        ["--temperature", "nan"],
        ["--top-p", "2"],
        ["--max-new-tokens", "0"],
        ["--device", "bogus"],
        ["--dtype", "bogus"],
    ],
)
def test_a_failed_eval_leaves_its_folder_free_for_the_corrected_one(
    tmp_path, dataset, model_dir, bad
):
    from traac.commands.eval import main

    out = tmp_path / "run"
    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out)]
    argv += ["--num-samples", "1", "--max-new-tokens", "2", "--limit", "1"]
    with pytest.raises(TraacError, match=re.escape(bad[0])):
        main([*argv, *bad])
    assert not (out / "run.json").exists()
    assert main(argv) == 0


def test_a_wrong_responses_file_leaves_the_folder_free(tmp_path, dataset):
    out = tmp_path / "out"
    unknown = write_responses(tmp_path / "unknown.jsonl", {**GOLD, "zz": "1"})
    with pytest.raises(TraacError, match="not in the dataset"):
        score(dataset, unknown, out)
    assert not (out / "run.json").exists()
    right = write_responses(tmp_path / "right.jsonl", GOLD)
    assert score(dataset, right, out).summary.overall.accuracy == 100.0


def test_a_model_that_does_not_load_leaves_the_folder_free(tmp_path, dataset, model_dir):
    from traac.commands.eval import main

    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (broken / name).write_bytes((model_dir / name).read_bytes())
    (broken / "config.json").write_text("{}")
    out = tmp_path / "run"
    argv = ["--dataset", str(dataset), "--output", str(out), "--num-samples", "1"]
    argv += ["--max-new-tokens", "2", "--limit", "1"]
    with pytest.raises(TraacError, match="cannot load it"):
        main(["--model", str(broken), *argv])
    assert not (out / "run.json").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"id": "m1", "response": "\xff"}\n', "not UTF-8 text (byte 26"),
        (b'{"id": "m1", "response": "\\ud800 2"}\n', "line 1: holds a lone surrogate"),
    ],
)
def test_responses_that_are_not_text_are_one_line(tmp_path, dataset, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    with pytest.raises(TraacError, match=re.escape(message)):
        score(dataset, bad, tmp_path / "out", limit=1)
    assert not (tmp_path / "out" / "run.json").exists()


@pytest.mark.parametrize("output", ["file", "/proc/traac-eval"])
def test_an_unwritable_output_is_one_line(tmp_path, dataset, output):
    target = tmp_path / "file" if output == "file" else Path(output)
    (tmp_path / "file").write_text("")
    responses = write_responses(tmp_path / "r.jsonl", GOLD)
    with pytest.raises(TraacError, match=re.escape(f"--output {target}: ")):
        score(dataset, responses, target)


def test_an_empty_dataset_name_is_not_the_current_directory(tmp_path, model_dir):
    from traac.commands.eval import main

    argv = ["--model", str(model_dir), "--output", str(tmp_path / "run")]
    for empty in ("", "  "):
        with pytest.raises(TraacError, match="--dataset: empty"):
            main([*argv, "--dataset", empty])


def test_a_bad_option_value_is_one_line_without_the_usage(capsys):
    from traac.cli import main

    assert main(["eval", "--dataset", "x", "--output", "o", "--model", "m", "--limit", "a"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --limit: invalid int value: 'a'" in err


def test_a_full_disk_is_one_line_and_loses_nothing(tmp_path, dataset, tokenizer, monkeypatch):
    """ENOSPC in the third batch: the two batches before stay, and the rerun completes them."""
    import errno

    import traac.evaluation.harness.samples as samples

    settings = EvalSettings(dataset=str(dataset), model="fake")
    out = tmp_path / "out"
    calls = {"n": 0}
    real_fsync = os.fsync

    def fsync(fd):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(samples.os, "fsync", fsync)
    backend = FlakyBackend(tokenizer, GOLD)
    kwargs = {"num_samples": 2, "batch_size": 4, "tokenizer": tokenizer}
    with pytest.raises(TraacError, match=r"No space left on device.*samples written before"):
        run_eval(settings, out, make_backend=lambda t: backend, **kwargs)
    kept = lines(out / "samples.jsonl")
    assert len(kept) >= 8  # the first two batches
    monkeypatch.setattr(samples.os, "fsync", real_fsync)
    result = run_eval(settings, out, make_backend=lambda t: backend, **kwargs)
    assert lines(out / "samples.jsonl")[:8] == kept[:8]
    assert result.summary.overall.n_samples == 16 and result.summary.overall.accuracy == 100.0


def test_a_resume_after_a_torn_line_makes_the_uninterrupted_records(tmp_path, dataset, model_dir):
    """Seeds per sample, not per batch: after a cut at line 7 of 16 the resumed run's batches
    fall differently, and it must still make the records an uninterrupted run made."""
    from traac.commands.eval import main

    def argv(out: Path) -> list[str]:
        return ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out),
                "--num-samples", "2", "--max-new-tokens", "8", "--batch-size", "4"]  # fmt: skip

    assert main(argv(tmp_path / "whole")) == 0
    whole = (tmp_path / "whole" / "samples.jsonl").read_text()
    assert main(argv(tmp_path / "cut")) == 0
    samples = tmp_path / "cut" / "samples.jsonl"
    kept = whole.splitlines(keepends=True)
    samples.write_text("".join(kept[:6]) + kept[6][:20])  # torn mid-line
    assert main(argv(tmp_path / "cut")) == 0
    assert samples.read_text() == whole
    assert len({json.loads(x)["response"] for x in kept}) > 1  # sampled, not one fixed text


def test_cuda_without_a_gpu_is_one_line(tmp_path, dataset, model_dir, monkeypatch):
    import torch

    from traac.commands.eval import main

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    out = tmp_path / "run"
    argv = ["--model", str(model_dir), "--dataset", str(dataset), "--output", str(out)]
    with pytest.raises(TraacError, match="--device cuda: no CUDA GPU is visible here"):
        main([*argv, "--device", "cuda"])
    assert not out.exists()


def test_a_second_writer_is_refused_unless_it_waits(tmp_path):
    """A user's second `traac eval` on one directory is refused; a pipeline's waits for the
    first writer (two arms of a study started at once both evaluate the base model in the
    store's one directory: the second died at once on the lock)."""
    held = FileLock(tmp_path / ".lock")
    held.acquire()
    with pytest.raises(TraacError, match="another traac eval is writing"), run_lock(tmp_path):
        pass
    entered = threading.Event()

    def second() -> None:
        with run_lock(tmp_path, wait=True):
            entered.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not entered.wait(0.5)  # still waiting while the first writer holds the lock
    held.release()
    thread.join(timeout=60)
    assert entered.is_set() and not thread.is_alive()
    with run_lock(tmp_path):  # and it let go
        pass
