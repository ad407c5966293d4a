"""`traac compress`: the step tables, JSON and HTML outputs, each scorer, one-line errors."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from traac.cli import main

REASONING = (
    "First, add 17 and 25 to get 42.\nWait, let me re-check: 17 + 25 = 42.\n"
    "Hmm, 17 + 20 = 37 and 37 + 5 = 42. So the sum is 42.\n"
    "Let me double-check once more: 25 + 17 = 42.\nTherefore the answer is 42.\n"
)


@pytest.fixture
def model_dir(tmp_path, char_tokenizer, save_tiny):
    """A random tiny Qwen3 model and a character-level tokenizer, saved like a hub model; its
    attention is sharpened so some steps stand out."""
    tokenizer = char_tokenizer(eos="<pad>")
    return save_tiny(
        tmp_path / "tiny-model",
        tokenizer,
        max_position_embeddings=400,
        q_scale=12.0,
        k_scale=12.0,
    )


def run(capsys, *argv):
    code = main(["compress", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_file_prints_steps_and_writes_json_and_html(model_dir, tmp_path, capsys):
    source = tmp_path / "trace.txt"
    source.write_text(REASONING)
    out_json, out_html = tmp_path / "out.json", tmp_path / "out.html"
    code, out, err = run(
        capsys,
        "--model", model_dir, "--input", source, "--compress-tau", "1.0",
        "--uniformity-gate", "1.0", "--step-scope", "reasoning",
        "--json", out_json, "--html", out_html,
    )  # fmt: skip
    assert code == 0, err
    assert "trace.txt" in out and "evicted" in out and "u = " in out and "tokens " in out
    payload = json.loads(out_json.read_text())
    settings = payload["settings"]  # named as the settings fields are
    assert settings["scorer"] == "attention" and settings["compress_tau"] == 1.0
    assert settings["uniformity_gate"] == 1.0 and settings["step_scope"] == "reasoning"
    (trace,) = payload["traces"]
    steps = trace["steps"]
    assert "".join(s["text"] for s in steps) == REASONING
    assert trace["compressed"] == "".join(s["text"] for s in steps if s["kept"])
    assert trace["tokens_before"] == len(REASONING)  # one token per character
    assert trace["tokens_after"] == len(trace["compressed"]) < len(REASONING)
    assert 0.0 < trace["eviction_fraction"] <= 0.8 and trace["uniformity"] < 1.0
    assert sum(not s["kept"] for s in steps) == int(len(steps) * trace["eviction_fraction"])
    assert all(s["score"] >= 0 for s in steps)
    page = out_html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "evicted" in page and "<h2>trace.txt</h2>" in page
    assert f"tokens {trace['tokens_before']} &rarr; {trace['tokens_after']}" in page


def test_a_foreign_scoring_model_scores_the_steps(model_dir, smollm2, tmp_path, capsys):
    source, out_json = tmp_path / "trace.txt", tmp_path / "out.json"
    source.write_text(REASONING)
    code, out, err = run(
        capsys,
        "--model", model_dir, "--scoring-model", smollm2, "--input", source,
        "--compress-tau", "1.0", "--uniformity-gate", "1.0", "--json", out_json,
    )  # fmt: skip
    assert code == 0, err
    assert "'>', the last of the 3 tokens" in out  # SmolLM2's pieces of </think>, not --model's
    payload = json.loads(out_json.read_text())
    assert payload["settings"]["scoring_model"] == str(smollm2)
    (trace,) = payload["traces"]
    assert "".join(s["text"] for s in trace["steps"]) == REASONING
    scorer_tokens = AutoTokenizer.from_pretrained(smollm2)(REASONING, add_special_tokens=False)
    assert trace["tokens_before"] == len(scorer_tokens.input_ids) < len(REASONING)
    assert len(trace["compressed"]) < len(REASONING)


def test_jsonl_with_each_scorer(model_dir, tmp_path, capsys):
    source = tmp_path / "traces.jsonl"
    lines = [  # the confidence scorer reads the policy with the question in context
        {"id": "easy", "reasoning": REASONING, "question": "What is 17 + 25?"},
        {"reasoning": "So 2 + 2 = 4. Done.", "question": "What is 2 + 2?"},
    ]
    source.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    results = {}
    for scorer in ("attention", "confidence", "random"):
        out_json = tmp_path / f"{scorer}.json"
        code, out, err = run(
            capsys, "--model", model_dir, "--input", source, "--scorer", scorer,
            "--probe-layers", "first_half", "--step-scope", "reasoning", "--uniformity-gate", "1.0",
            "--json", out_json,
        )  # fmt: skip
        assert code == 0, err
        assert "easy" in out and "line 2" in out
        traces = json.loads(out_json.read_text())["traces"]
        assert [t["title"] for t in traces] == ["easy", "line 2"]
        results[scorer] = [s["score"] for s in traces[0]["steps"]]
    assert results["attention"] != results["confidence"] != results["random"]
    code, _, _ = run(
        capsys, "--model", model_dir, "--input", source, "--scorer", "random",
        "--step-scope", "reasoning", "--uniformity-gate", "1.0", "--json", tmp_path / "again.json",
    )  # fmt: skip
    again = json.loads((tmp_path / "again.json").read_text())["traces"][0]["steps"]
    assert [s["score"] for s in again] == results["random"]


def test_probe_scope_and_a_gate_below_u_evict_nothing(model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside the table
    source = tmp_path / "trace.txt"
    source.write_text(REASONING)
    out_json = tmp_path / "out.json"
    code, out, err = run(
        capsys, "--model", model_dir, "--input", source,
        "--uniformity-gate", "0.3", "--json", out_json,
    )  # fmt: skip
    assert code == 0, err
    (trace,) = json.loads(out_json.read_text())["traces"]
    assert trace["uniformity"] > 0.3 and trace["eviction_fraction"] == 0.0
    assert trace["compressed"] == REASONING and "evicted" not in out
    # scope `probe`: the reasoning opens with a phrase, so step 0 holds only the opener
    assert trace["steps"][0]["text"] == "" and "[opener]" in out
    assert "[+ auxiliary prompt, closer]" in out


BAD_INPUTS = {
    "closer": ("trace.txt", "So x.</think> 4", "contains '</think>'; pass only the text inside"),
    "opener": ("trace.txt", "<think>So x.", "contains '<think>'"),
    "empty": ("trace.txt", "", "the reasoning is empty"),
    "blank": ("trace.txt", " \n\t", "the reasoning is empty"),
    "too long": ("trace.txt", "So " * 200, "is 716 tokens but the model takes at most 400"),
    "no field": ("t.jsonl", '{"reasoning": "So."}\n{"text": "x"}\n', "line 2: no 'reasoning'"),
    "bad json": ("t.jsonl", '{"reasoning": "So."}\n\n{oops\n', "line 3: not valid JSON"),
    "not str": ("t.jsonl", '{"reasoning": 3}\n', "line 1: 'reasoning' must be a string"),
    "no lines": ("t.jsonl", "\n\n", "no lines"),
    "empty line": ("t.jsonl", '{"reasoning": ""}\n', "line 1: the reasoning is empty"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(model_dir, tmp_path, capsys, case):
    name, content, message = BAD_INPUTS[case]
    source = tmp_path / name
    source.write_text(content)
    code, _, err = run(capsys, "--model", model_dir, "--input", source)
    assert code == 2
    assert err.startswith("traac compress: error: ") and err.count("\n") == 1
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--input", "{tmp}"], "is a directory"),
        (["--input", "{tmp}/missing.txt"], "no such file"),
        (["--model", "{tmp}/no-model", "--input", "{trace}"], "no such directory"),
        (["--input", "{trace}", "--compress-tau", "1.5"], "--compress-tau 1.5: must lie in [0, 1]"),
        (["--input", "{trace}", "--probe-layers", "9"], "probe_layers: [9] must be"),
        (["--input", "{trace}", "--probe_layers", "last"], "probe_layers: 'last' is not"),
        (["--input", "{trace}", "--uniformity_gate", "1.5"], "uniformity_gate: 1.5 must be"),
        (["--input", "{trace}", "--eviction-cap", "-0.1"], "eviction_cap: -0.1 must be"),
        (["--input", "{trace}", "--confidence-top-k", "1"], "confidence_top_k: 1 must be"),
        (["--input", "{trace}", "--json", "{tmp}/no/dir/out.json"], "no directory"),
        (["--input", "{trace}", "--json", "{tmp}"], "is a directory"),
        (["--input", "{trace}", "--scorer", "confidence"], "give each line a 'question' field"),
        (["--input", "{trace}", "--scorer", "entropy"], "invalid choice: 'entropy'"),
        (
            ["--input", "{trace}", "--scorer", "confidence", "--scoring-model", "x"],
            "--scoring-model: 'x' with scorer confidence; the confidence scorer reads",
        ),
        (["--input", "{trace}", "--think-close", "<think>"], "must differ"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(model_dir, tmp_path, capsys, extra, message):
    trace = tmp_path / "trace.txt"
    trace.write_text(REASONING)
    argv = [a.format(tmp=tmp_path, trace=trace) for a in extra]
    if "--model" not in argv:
        argv = ["--model", str(model_dir), *argv]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("traac compress: error: ") and err.count("\n") == 1
    assert message in err


def test_an_old_option_name_is_a_one_line_error(capsys):
    code, _, err = run(capsys, "--input", "x.txt", "--tau", "0.5")
    assert code == 2
    assert err.startswith("traac compress: error: ") and err.count("\n") == 1
    assert "unknown option --tau" in err


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_an_unwritable_output_file_fails_before_any_work(tmp_path, capsys, monkeypatch, flag):
    """Checked by writing, so `/proc` (which root may 'write' by permissions) fails up front."""
    trace = tmp_path / "trace.txt"
    trace.write_text(REASONING)
    monkeypatch.setattr(
        "traac.pipelines.model_registry.resolve_model", lambda *a: pytest.fail("work started")
    )
    code, _, err = run(capsys, "--input", trace, flag, "/proc/traac-out.x")
    assert code == 2 and err.count("\n") == 1
    assert f"{flag} /proc/traac-out.x: cannot write it" in err
