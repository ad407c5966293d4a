"""Building the testbed: one end-to-end `--quick` build in a temporary cache, then the cache
paths (reuse, lock, interrupted builds) and the `traac testbed` command."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import torch

from traac import cli
from traac.testbed import build as build_module
from traac.testbed.build import CARD, build_cached, cache_path, ensure_testbed
from traac.testbed.config import BASES, default_config
from traac.testbed.measure import PROBE_REPORT_PER_TIER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_model(quick_testbed):
    """The session's quick testbed (tests/conftest.py) and the private cache it was built in."""
    return quick_testbed, quick_testbed.parent.parent


def test_quick_build_loads_and_generates_a_response(quick_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from traac.common.models import prompt_style_of
    from traac.compression.formats import ChatFormat
    from traac.data.testbed_problems import make_items

    path, cache = quick_model
    assert path.parent == cache / "testbed"
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.max_position_embeddings >= 1024
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.top_k == 0
    assert prompt_style_of(str(path)) == "question"  # what `traac eval` prompts it with by default

    item = make_items("easy", 1, seed=11)[0]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": item.question}], add_generation_prompt=True, tokenize=False
    )
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=300, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    assert tokenizer.eos_token_id in new  # stopped by itself
    response = tokenizer.decode(new[: new.index(tokenizer.eos_token_id)])
    parsed = ChatFormat().parse(response)
    assert parsed.well_formed, response
    assert "\\boxed{" in parsed.answer, response


def test_card_reports_the_measured_properties(quick_model):
    path, _ = quick_model
    card = json.loads((path / CARD).read_text())
    config = default_config(quick=True)
    assert card["config_hash"] == config.hash()
    assert card["seeds"]["sft"] == 0 and card["seeds"]["rl"] != card["seeds"]["eval"]
    tiers = card["measure"]["tiers"]
    assert set(tiers) == {"easy", "medium", "hard"}
    for row in tiers.values():
        assert row["responses"] == config.measure.n_per_tier * config.measure.samples
        assert 0.0 <= row["accuracy"] <= 1.0
        assert row["well_formed"] >= 0.5  # the quick model must mostly write the format
    assert set(card["measure"]["targets"]) >= {"easy_accuracy", "hard_accuracy", "all_met"}
    versus = card["measure"]["probe"]["recheck_vs_key"]
    assert set(versus["relative_score_by_layer"]) == {
        str(i) for i in range(config.model.num_hidden_layers)
    }
    assert card["train"]["steps"] > 0 and card["train"]["parameters"] > 0
    report = card["measure"]["probe_report"]  # the card's own correct responses, each scorer
    assert set(report) == {
        "attention all", "attention first_half", "attention all, gated heads",
        "attention first_half, gated heads", "confidence", "random", "step entropy",
    }  # fmt: skip
    for tiers in report.values():
        assert 0 < tiers["all"]["responses"] <= 3 * PROBE_REPORT_PER_TIER
        assert 0.0 <= tiers["all"]["compressed_share"] <= 1.0


def test_second_call_reuses_the_cache(quick_model, monkeypatch):
    path, cache = quick_model
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(cache))
    monkeypatch.setattr(build_module, "_build_steps", _must_not_build)

    def entries() -> set[str]:  # other tests of the session may build other models here
        return {p.name for p in (cache / "testbed").iterdir() if not p.name.endswith(".lock")}

    before = entries()
    assert ensure_testbed(quick=True) == path
    assert path.name in before and entries() == before


def test_show_prints_the_card(quick_model, monkeypatch, capsys):
    path, cache = quick_model
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(cache))
    assert cli.main(["testbed", "show", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "easy" in out and "hard" in out and str(path.name) in out.replace("\n", "")
    assert "Step scorers on all correct responses" in out
    assert cli.main(["testbed", "show", "--quick", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["name"] == "quick"


def _must_not_build(*args, **kwargs):
    raise AssertionError("the cache entry should have been reused")


def _fake_build(calls: list[int], delay: float = 0.0):
    def fake(work: Path, config, progress, checkpoints) -> dict:
        calls.append(1)
        time.sleep(delay)
        (work / "config.json").write_text("{}")
        (work / CARD).write_text("{}")
        return {}

    return fake


def test_concurrent_callers_build_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    monkeypatch.setattr(build_module, "_build_steps", _fake_build(calls, delay=0.5))
    config = default_config(seed=5)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(build_cached(config))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert results == [cache_path(config)] * 3
    assert (cache_path(config) / CARD).exists()


def test_interrupted_build_leaves_no_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))

    def interrupted(work: Path, config, progress, checkpoints) -> dict:
        (work / "model.safetensors").write_text("half written")
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "_build_steps", interrupted)
    config = default_config(seed=6)
    with pytest.raises(KeyboardInterrupt):
        build_cached(config)
    leftovers = [p for p in (tmp_path / "testbed").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []
    # a later call builds it properly
    calls: list[int] = []
    monkeypatch.setattr(build_module, "_build_steps", _fake_build(calls))
    assert build_cached(config) == cache_path(config)
    assert calls == [1]


def test_an_interrupted_sft_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """A build stopped after its step-2 checkpoint resumes there (not from step 0), and a whole
    build leaves no checkpoints behind."""
    from dataclasses import replace

    from traac.testbed.config import MeasureSettings

    quick = default_config(quick=True)
    config = replace(
        quick,
        train=replace(quick.train, n_traces=16, batch_size=4),  # 4 steps
        measure=MeasureSettings(n_per_tier=2, samples=1, max_new_tokens=16, batch_size=6),
    )
    stop = {"at": 2}

    class StopAfterSaving(build_module._SaveEvery):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == stop["at"]:
                raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "SAVE_EVERY_S", 0.0)  # a checkpoint every step
    monkeypatch.setattr(build_module, "_SaveEvery", StopAfterSaving)
    target = tmp_path / "model"
    with pytest.raises(KeyboardInterrupt):
        build_module.build_testbed(target, config)
    checkpoints = build_module.sft_checkpoints(target)
    assert not target.exists() and (checkpoints / "checkpoint-2").is_dir()

    stop["at"] = None
    card = build_module.build_testbed(target, config)
    assert card["train"]["resumed_from_step"] == 2 and card["train"]["steps"] == 4
    assert (target / CARD).exists() and not checkpoints.exists()


def test_a_build_stopped_while_measuring_resumes_after_its_last_sft_step(tmp_path, monkeypatch):
    """A long build saves its last SFT step: stopped in the measuring, it trains nothing again,
    and its weights are an unstopped build's, bit for bit."""
    from dataclasses import replace

    from safetensors.torch import load_file

    from traac.testbed.config import MeasureSettings

    quick = default_config(quick=True)
    config = replace(
        quick,
        train=replace(quick.train, n_traces=16, batch_size=4),  # 4 steps
        measure=MeasureSettings(n_per_tier=2, samples=1, max_new_tokens=16, batch_size=6),
    )
    whole = build_module.build_testbed(tmp_path / "whole", config)  # no checkpoint: too short
    assert whole["train"]["resumed_from_step"] is None
    monkeypatch.setattr(build_module, "SAVE_EVERY_S", 0.0)  # every build is long enough
    measure = build_module.measure

    def stopping(*args, **kwargs):
        raise KeyboardInterrupt

    target = tmp_path / "model"
    monkeypatch.setattr(build_module, "measure", stopping)
    with pytest.raises(KeyboardInterrupt):
        build_module.build_testbed(target, config)
    assert (build_module.sft_checkpoints(target) / "checkpoint-4").is_dir()
    monkeypatch.setattr(build_module, "measure", measure)
    card = build_module.build_testbed(target, config)
    assert card["train"]["resumed_from_step"] == 4 and card["train"]["steps"] == 4
    weights = [load_file(d / "model.safetensors") for d in (tmp_path / "whole", target)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_stale_temporary_directory_of_a_dead_build_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))
    config = default_config(seed=8)
    target = cache_path(config)
    stale = target.parent / f".{target.name}.tmp-abc123-999999999"  # no such process
    stale.mkdir(parents=True)
    monkeypatch.setattr(build_module, "_build_steps", _fake_build([]))
    build_cached(config)
    assert not stale.exists()


def test_cli_errors_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))
    assert cli.main(["testbed", "show"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("traac testbed: error: testbed: no built model at")
    assert "\n" not in err
    existing = tmp_path / "model"
    existing.mkdir()
    (existing / CARD).write_text("{}")
    assert cli.main(["testbed", "build", "--output", str(existing)]) == 2
    assert "--force" in capsys.readouterr().err
    assert cli.main(["testbed", "build", "--seed", "x"]) == 2  # one line, no usage dump
    err = capsys.readouterr().err.strip()
    assert err.startswith("traac testbed: error: ") and "--seed" in err and "\n" not in err


def test_config_hash_keys_the_cache():
    assert default_config().hash() == default_config().hash()
    assert default_config().hash() != default_config(quick=True).hash()
    assert default_config(seed=1).hash() != default_config(seed=2).hash()
    assert cache_path(default_config(seed=3)).name.startswith("full-seed3-")


@pytest.mark.parametrize("cache", ["file", "/proc/traac-cache"])
def test_an_unwritable_cache_is_one_line_before_any_build(tmp_path, monkeypatch, capsys, cache):
    (tmp_path / "file").write_text("")
    root = tmp_path / "file" if cache == "file" else Path(cache)
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(root))
    monkeypatch.setattr("traac.testbed.build._build_steps", lambda *a: pytest.fail("built"))
    assert cli.main(["testbed", "build", "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"traac testbed: error: testbed cache {root / 'testbed'}: ")
    assert err.endswith("set TRAAC_CACHE_DIR to a writable directory") and "\n" not in err


@pytest.mark.parametrize("output", ["file", "/proc/traac-testbed"])
def test_an_unwritable_output_is_one_line_before_any_build(tmp_path, monkeypatch, capsys, output):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" if output == "file" else Path(output)
    monkeypatch.setattr("traac.testbed.build._build_steps", lambda *a: pytest.fail("built"))
    assert cli.main(["testbed", "build", "--quick", "--force", "--output", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("traac testbed: error: testbed: ") and "\n" not in err


def _tiny_think_config():
    """SmolLM2 taught on 8 traces (2 steps), measured on 2 problems a tier: the build path of
    `--base smollm2` in about a minute, not the model it builds."""
    from dataclasses import replace

    from traac.testbed.config import SMOLLM2_THINK, MeasureSettings

    return replace(
        SMOLLM2_THINK,
        train=replace(SMOLLM2_THINK.train, n_traces=8, batch_size=4),
        measure=MeasureSettings(n_per_tier=2, samples=1, max_new_tokens=24, batch_size=6),
    )


def test_base_build_fine_tunes_the_pretrained_model(smollm2, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = tmp_path / "think"
    card = build_module.build_testbed(target, _tiny_think_config())
    assert card["config"]["base"] == "smollm2" and "model" not in card["config"]
    assert card["train"]["steps"] == 2
    assert len(card["train"]["think_close_ids"]) > 1  # SmolLM2 spells </think> in pieces
    assert set(card["measure"]["tiers"]) == {"easy", "medium", "hard"}
    assert json.loads((target / "config.json").read_text())["traac_prompt_style"] == "question"
    assert AutoTokenizer.from_pretrained(target).eos_token == "<|im_end|>"
    tuned = AutoModelForCausalLM.from_pretrained(target)
    base = AutoModelForCausalLM.from_pretrained(smollm2)
    assert tuned.num_parameters() == base.num_parameters()
    assert not torch.equal(tuned.model.norm.weight, base.model.norm.weight)  # it was trained


def test_base_build_learns_the_long_traces_a_micro_batch_at_a_time(smollm2, tmp_path, monkeypatch):
    """`--base smollm2 --long POS` at toy size: SmolLM2 on the long traces, 4 traces an
    optimizer step read 2 at a time, its card measured by the long teacher's grammar."""
    from dataclasses import replace

    from trl import SFTTrainer

    from traac.testbed.config import MeasureSettings

    rows: list[int] = []
    loss = SFTTrainer.compute_loss

    def counted(self, model, inputs, *args, **kwargs):
        rows.append(inputs["input_ids"].shape[0])
        return loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SFTTrainer, "compute_loss", counted)
    config = default_config(base="smollm2", long="interleaved")
    config = replace(
        config,
        train=replace(config.train, n_traces=8, batch_size=4, micro_batch=2),
        measure=MeasureSettings(n_per_tier=2, samples=1, max_new_tokens=24, batch_size=6),
    )
    card = build_module.build_testbed(tmp_path / "think-long", config)
    assert card["train"]["steps"] == 2 and rows == [2, 2, 2, 2]
    assert card["config"]["teacher"]["position"] == "interleaved"
    assert card["config"]["train"]["micro_batch"] == 2 and "model" not in card["config"]
    assert all("step_kinds" in row for row in card["measure"]["tiers"].values())


def test_base_config_keeps_the_testbed_hashes_and_names_its_own_entry():
    assert "base" not in default_config().to_dict()  # older cache entries stay valid
    think = default_config(base="smollm2")
    assert think.hash() != default_config().hash()
    assert cache_path(think).name.startswith("smollm2-think-seed0-")
    assert set(BASES) == set(build_module.BASE_GGUF)  # each base the CLI offers can be loaded


def test_base_flag_errors_are_one_line(capsys):
    assert cli.main(["testbed", "build", "--base", "smollm2", "--quick"]) == 2
    assert "--quick" in capsys.readouterr().err
    assert cli.main(["testbed", "show", "--base", "gpt2"]) == 2
    assert "--base" in capsys.readouterr().err


def test_long_flag_errors_are_one_line(capsys):
    assert cli.main(["testbed", "build", "--long", "interleaved", "--quick"]) == 2
    assert "--long builds the full tiny model or --base; drop --quick" in capsys.readouterr().err
    assert cli.main(["testbed", "show", "--long", "sideways"]) == 2
    assert "--long" in capsys.readouterr().err


def test_show_prints_a_long_builds_step_kinds(tmp_path, capsys):
    shares = {"needed": 0.3, "conclude": 0.075, "recheck": 0.625}
    row = {"accuracy": 0.5, "think_tokens": 150.0, "recheck_share": 0.9, "well_formed": 1.0,
           "step_kinds": {"steps_per_response": 20.0, "redundant_share": 0.625,
                          "shares": shares}}  # fmt: skip
    card = {
        "config": {"name": "long-interleaved", "seed": 0},
        "measure": {"problems_per_tier": 50, "samples": 1, "temperature": 1.0,
                    "tiers": {"easy": row}, "probe": {},
                    "targets": {"easy_accuracy": {"value": 0.5, "met": False}, "all_met": False}},
        "train": {"parameters": 849_536, "steps": 563, "seconds": 876.0},
        "build_seconds": 937.0,
        "load_average": [3.0, 4.0, 5.0],
    }  # fmt: skip
    (tmp_path / CARD).write_text(json.dumps(card))
    assert cli.main(["testbed", "show", "--long", "interleaved", "--output", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "easy: 20.0 steps a response, 62.5% redundant (needed 30.0%, conclude 7.5%, " in out
