import json

import pytest

from tiny import char_tokenizer, save_tiny
from traac.cli import main

REASONING = (
    "First, add 17 and 25 to get 42.\nWait, let me re-check: 17 + 25 = 42.\n"
    "Hmm, 17 + 20 = 37 and 37 + 5 = 42. So the sum is 42.\n"
    "Let me double-check once more: 25 + 17 = 42.\nTherefore the answer is 42.\n"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A random tiny Qwen3 model and a character-level tokenizer, saved like a hub model; its
    attention is sharpened so some steps stand out."""
    tokenizer = char_tokenizer(eos="<pad>")
    return save_tiny(
        tmp_path_factory.mktemp("tiny-model"),
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
        "--model", model_dir, "--input", source, "--tau", "1.0", "--gate", "1.0",
        "--scope", "reasoning", "--json", out_json, "--html", out_html,
    )  # fmt: skip
    assert code == 0, err
    assert "trace.txt" in out and "evicted" in out and "u = " in out and "tokens " in out
    payload = json.loads(out_json.read_text())
    assert payload["settings"]["scorer"] == "attention" and payload["settings"]["tau"] == 1.0
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


def test_jsonl_with_each_scorer(model_dir, tmp_path, capsys):
    source = tmp_path / "traces.jsonl"
    lines = [{"id": "easy", "reasoning": REASONING}, {"reasoning": "So 2 + 2 = 4. Done."}]
    source.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    results = {}
    for scorer in ("attention", "confidence", "random"):
        out_json = tmp_path / f"{scorer}.json"
        code, out, err = run(
            capsys, "--model", model_dir, "--input", source, "--scorer", scorer,
            "--layers", "first_half", "--scope", "reasoning", "--gate", "1.0", "--json", out_json,
        )  # fmt: skip
        assert code == 0, err
        assert "easy" in out and "line 2" in out
        traces = json.loads(out_json.read_text())["traces"]
        assert [t["title"] for t in traces] == ["easy", "line 2"]
        results[scorer] = [s["score"] for s in traces[0]["steps"]]
    assert results["attention"] != results["confidence"] != results["random"]
    code, _, _ = run(
        capsys, "--model", model_dir, "--input", source, "--scorer", "random",
        "--scope", "reasoning", "--gate", "1.0", "--json", tmp_path / "again.json",
    )  # fmt: skip
    again = json.loads((tmp_path / "again.json").read_text())["traces"][0]["steps"]
    assert [s["score"] for s in again] == results["random"]


def test_probe_scope_and_a_gate_below_u_evict_nothing(model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside the table
    source = tmp_path / "trace.txt"
    source.write_text(REASONING)
    out_json = tmp_path / "out.json"
    code, out, err = run(
        capsys, "--model", model_dir, "--input", source, "--gate", "0.3", "--json", out_json
    )
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
        (["--input", "{trace}", "--tau", "1.5"], "--tau 1.5: must lie in [0, 1]"),
        (["--input", "{trace}", "--layers", "9"], "layers: [9] must be"),
        (["--input", "{trace}", "--json", "{tmp}/no/dir/out.json"], "cannot write there"),
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


def test_argparse_rejects_unknown_scorer(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compress", "--input", "x.txt", "--scorer", "entropy"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'entropy'" in capsys.readouterr().err
