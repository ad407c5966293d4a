"""`traac generate`: the printed report, its JSON and HTML, and one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.cli import main
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.settings import CompressionSettings
from traac.evaluation.inference.testtime import ThinkingGenerator

SPECIALS = ["<pad>", "<eos>", "<think>", "</think>"]
PAD, EOS, OPEN, CLOSE = range(4)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
REASONINGS = {  # question -> what the model is made to think
    "q1": "So 2+2 is 4. Wait, check: 2+2=4. Therefore 4.",
    "a longer question, which pads the others": "First x. Then y. Hmm z. So y",
    "q3?": "Okay. Let me see. So the answer is 7. Wait no 8. Hmm, 9? Then 10. So 8",
}


class Script:
    """A logits processor forcing, per prompt, the think tokens up to the closer and then the
    answer, each followed by eos. (The same as tests/evaluation/inference/test_testtime.py's: pytest
    shares fixtures between sibling test directories only through tests/conftest.py.)"""

    def __init__(self, tokenizer, plans: dict[str, tuple[list[int], list[int]]]) -> None:
        self.plans = {
            tuple(tokenizer.encode(p, add_special_tokens=False)): plan for p, plan in plans.items()
        }

    def __call__(self, history: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        out = logits.clone()
        for r, row in enumerate(history.tolist()):
            row = row[next(k for k, t in enumerate(row) if t != PAD) :]
            prompt = next(p for p in self.plans if tuple(row[: len(p)]) == p)
            think, answer = self.plans[prompt]
            after = row[len(prompt) :]
            if CLOSE in after:
                target, done = answer, len(after) - after.index(CLOSE) - 1
            else:
                target, done = think, len(after)
            out[r] = float("-inf")
            out[r, target[done] if done < len(target) else EOS] = 0.0
        return out


def enc(tokenizer, *pieces: str) -> list[int]:
    return [t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False)]


@pytest.fixture
def tokenizer(char_tokenizer):
    return char_tokenizer(SPECIALS, eos="<eos>", merges=[(".", "\n")], chat_template=CHAT_TEMPLATE)


@pytest.fixture
def model_dir(tmp_path, tokenizer, save_tiny):
    """A tiny random Qwen3 with sharp attention (step scores uneven enough to evict) and its
    tokenizer (with a chat template), saved like a real model."""
    return save_tiny(
        tmp_path / "tiny-model", tokenizer, q_scale=16.0, pad_token_id=PAD, eos_token_id=EOS
    )


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["generate", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scripted(monkeypatch, tokenizer):
    """Make the model think the scripted reasonings of `REASONINGS` (keyed by its prompt as the
    chat template renders it), so the printed report has compressions to show."""
    plans = {
        f"<|user|>{q}\n<|assistant|>": ([OPEN, *enc(tokenizer, r), CLOSE], enc(tokenizer, " 8"))
        for q, r in REASONINGS.items()
    }
    original = ThinkingGenerator.generate

    def generate(self, prompts, **kwargs):
        return original(self, prompts, logits_processor=Script(tokenizer, plans), **kwargs)

    monkeypatch.setattr(ThinkingGenerator, "generate", generate)


def test_generate_prints_pruned_steps_and_writes_json_and_html(
    model_dir, tmp_path, capsys, scripted
):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "\n".join(json.dumps({"id": f"p{k}", "prompt": q}) for k, q in enumerate(REASONINGS)) + "\n"
    )
    out_json, out_html = tmp_path / "out.json", tmp_path / "out.html"
    code, out, err = run_cli(
        capsys,
        "--model", str(model_dir), "--input", str(questions), "--compress-tau", "1",
        "--show-steps", "--json", str(out_json), "--html", str(out_html),
    )  # fmt: skip
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    samples = payload["samples"]
    assert [s["title"] for s in samples] == ["p0", "p1", "p2"]
    settings = payload["settings"]  # named as the settings fields are
    assert settings["compress_tau"] == 1.0 and settings["probe_layers"] == "all"
    assert settings["scorer"] == "attention" and settings["uniformity_gate"] == 0.8
    assert settings["scoring_model"] is None and settings["probe"] == "cached"
    assert any(s["tokens_saved"] > 0 for s in samples)
    for s, reasoning in zip(samples, REASONINGS.values(), strict=True):
        assert s["closed"] and s["reasoning"] == reasoning and s["answer"] == " 8"
        assert "".join(step["text"] for step in s["steps"]) == reasoning
        assert s["response"] == f"<think>{s['compressed_reasoning']}</think> 8"
    assert "reasoning tokens" in out and "evicted" in out and "answer:" in out
    assert "3 prompt(s), 3 closed their think block" in out
    assert "<html" in out_html.read_text().lower()


@pytest.mark.parametrize("tau", [None, "1"])
def test_a_think_budget_interrupts_and_the_model_answers(
    model_dir, tmp_path, capsys, scripted, tau
):
    """At 10 think tokens every scripted reasoning is interrupted: the auxiliary prompt and the
    closer are appended and the scripted answer follows; pruned first with --compress-tau."""
    from traac.compression.formats import AUX_PROMPT, ChatFormat

    out_json = tmp_path / "out.json"
    args = ["--model", str(model_dir), "--prompt", "q1", "--think-budget", "10"]
    code, out, err = run_cli(
        capsys, *args, *(["--compress-tau", tau] if tau else []), "--json", str(out_json)
    )
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["settings"]["think_budget"] == 10
    assert payload["settings"]["compress_tau"] == (1.0 if tau else None)
    (sample,) = payload["samples"]
    assert sample["closed"] and sample["interrupted"]
    assert sample["reasoning"] == REASONINGS["q1"][:9]  # the opener is the 10th token
    kept = sample["compressed_reasoning"]
    tail = ChatFormat.aux_separator(kept) + AUX_PROMPT
    assert sample["response"] == f"<think>{kept}{tail}</think> 8"
    assert (sample["steps"] != []) == (tau is not None)
    assert "interrupted at the think budget (10 tokens)" in out
    assert "1 prompt(s), 1 closed their think block (1 interrupted at the think budget)" in out


def test_unclosed_think_block_is_reported_uncompressed(model_dir, tmp_path, capsys):
    out_json = tmp_path / "out.json"
    code, out, err = run_cli(
        capsys,
        "--model", str(model_dir), "--prompt", "2+2?", "--max-new-tokens", "12",
        "--seed", "1", "--json", str(out_json),
    )  # fmt: skip
    assert code == 0, err
    (sample,) = json.loads(out_json.read_text())["samples"]
    if not sample["closed"]:  # a random model rarely closes within 12 tokens
        assert sample["steps"] == [] and sample["tokens_saved"] == 0
        assert "nothing compressed" in out
    assert sample["response_tokens"] <= 12


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "{tmp}/missing.txt"], "no such file"),
        (["--prompt", "   "], "--prompt: empty"),
        (["--input", "{tmp}/empty.txt"], "no prompts"),
        (["--input", "{tmp}/bad.jsonl"], "line 2: no 'prompt' or 'question' field"),
        (["--prompt", "hi", "--model", "{tmp}/no-such-model"], "no such directory"),
        (["--prompt", "hi", "--compress-tau", "1.5"], "--compress-tau 1.5"),
        (["--prompt", "hi", "--max-new-tokens", "0"], "--max-new-tokens 0"),
        (["--prompt", "hi", "--json", "{tmp}/no/dir/x.json"], "no directory"),
        (["--prompt", "hi", "--json", "{tmp}"], "is a directory"),
        (["--prompt", "hi", "--temperature", "nan"], "--temperature nan"),
        (["--prompt", "hi", "--uniformity-gate", "1.5"], "uniformity_gate: 1.5"),
        (["--prompt", "hi", "--think-budget", "0"], "--think-budget"),
        (["--prompt", "hi", "--think-budget", "8", "--scoring-model", "x"], "add --compress-tau"),
        (["--prompt", "hi", "--scorer", "random", "--scoring-model", "x"], "--scorer attention"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, args, message):
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    code, _, err = run_cli(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("traac generate: error:")
    assert message in err


def test_prompt_and_input_are_exclusive(capsys, tmp_path):
    code, _, err = run_cli(capsys, "--prompt", "a", "--input", str(tmp_path / "x.txt"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("traac generate: error:")
    assert "not allowed with argument" in err


def test_prompt_file_questions_are_rendered_with_the_chat_template(model_dir, tmp_path, capsys):
    questions = tmp_path / "questions.txt"
    questions.write_text("first question\n\nsecond question\n")
    out_json = tmp_path / "out.json"
    code, _, err = run_cli(
        capsys,
        "--model", str(model_dir), "--input", str(questions), "--max-new-tokens", "4",
        "--temperature", "0", "--json", str(out_json),
    )  # fmt: skip
    assert code == 0, err
    samples = json.loads(out_json.read_text())["samples"]
    assert [s["title"] for s in samples] == ["line 1", "line 3"]
    assert samples[0]["prompt"] == "<|user|>first question\n<|assistant|>"


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_an_unwritable_output_file_fails_before_any_work(capsys, monkeypatch, flag):
    """Checked by writing, so `/proc` (which root may 'write' by permissions) fails up front."""
    monkeypatch.setattr(
        "traac.commands.generate.load_generator", lambda *a: pytest.fail("work started")
    )
    code, _, err = run_cli(capsys, "--prompt", "hi", flag, "/proc/traac-out.x")
    assert code == 2 and err.count("\n") == 1
    assert f"{flag} /proc/traac-out.x: cannot write it" in err


def test_a_prompt_samples_the_same_at_any_batch_size(model_dir, tmp_path, capsys):
    """Each prompt draws from its own random stream, so batching does not change a response."""
    prompts = tmp_path / "q.txt"
    prompts.write_text("What is 1 + 1?\nWhat is 2 + 2?\nWhat is 3 + 3?\n")
    outputs = []
    for batch in ("1", "3"):
        out = tmp_path / f"b{batch}.json"
        argv = ["--model", str(model_dir), "--input", str(prompts), "--max-new-tokens", "12"]
        assert run_cli(capsys, *argv, "--batch-size", batch, "--json", str(out))[0] == 0
        outputs.append([s["response"] for s in json.loads(out.read_text())["samples"]])
    assert outputs[0] == outputs[1]


def test_a_scoring_model_scores_the_steps_and_is_recorded(
    model_dir, smollm2, tmp_path, capsys, scripted
):
    """SmolLM2 (another tokenizer) scores what the tiny model thought, after decoding."""
    out_json = tmp_path / "out.json"
    code, _, err = run_cli(
        capsys, "--model", str(model_dir), "--prompt", "q3?", "--compress-tau", "1",
        "--scoring-model", str(smollm2), "--json", str(out_json),
    )  # fmt: skip
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["settings"]["scoring_model"] == str(smollm2)
    assert payload["settings"]["probe"] == "reforward"
    (sample,) = payload["samples"]
    scorer = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    compressor = build_compressor(
        CompressionSettings(), scorer, AutoTokenizer.from_pretrained(smollm2), ChatFormat()
    )
    (result,) = compressor([REASONINGS["q3?"]], [1.0])
    assert result.compressed, "nothing evicted"
    assert [step["kept"] for step in sample["steps"]] == result.kept
    assert sample["compressed_reasoning"] == result.text
