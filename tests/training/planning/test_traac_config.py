"""TRAACConfig: the paper's defaults, the authors' preset, validation naming the field, and the
`traac train` parser (recipe + command-line overrides, TRL conventions)."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trl import GRPOConfig

from traac.compression.difficulty import SINGLE_BIN
from traac.compression.formats import AUX_PROMPT
from traac.errors import TraacError
from traac.pipelines.train import parse
from traac.training.methods.registry import METHODS
from traac.training.methods.traac import TraacSettings
from traac.training.planning.traac_config import TRAACConfig, TRAACConfigError

RECIPES = Path(__file__).resolve().parents[3] / "recipes"


def make(**overrides: object) -> TRAACConfig:
    return TRAACConfig(output_dir="unused", use_cpu=True, bf16=False, **overrides)


def mode_of(setting: str) -> tuple[str, str]:
    """The mode whose block (`alp.beta`) holds `setting`, and the setting's name there."""
    block, _, name = setting.partition(".")
    return next(n for n, m in METHODS.items() if m.settings and block == m.settings.BLOCK), name


def test_defaults_are_the_papers() -> None:
    c = make()
    grpo = (c.num_generations, c.temperature, c.top_p, c.top_k, c.epsilon, c.epsilon_high)
    assert grpo == (8, 1.0, 1.0, 0, 0.2, 0.28)
    assert (c.beta, c.learning_rate, c.warmup_steps, c.weight_decay) == (0.001, 1e-6, 10, 0.1)
    assert c.max_completion_length == 10000
    s = c.method_settings
    assert isinstance(s, TraacSettings)
    assert (c.mode, s.scorer, s.scoring_model, s.step_scope) == (
        "traac", "attention", "reference", "probe",
    )  # fmt: skip
    assert (c.format_preset, c.length_weight, s.probe_layers) == ("paper", 2.0, "all")
    assert (s.uniformity_gate, s.eviction_cap, s.uniformity_calibration) == (0.8, 0.8, "none")
    assert s.aux_prompt == AUX_PROMPT and c.split_phrases is None
    assert c.method_args == dataclasses.asdict(s)  # every key, once parsed
    d = c.difficulty_config()
    assert d.bins == ("easy", "medium", "hard")
    assert [d.bin_of(p) for p in (0.8, 0.79, 0.3, 0.29)] == ["easy", "medium", "medium", "hard"]
    assert [d.tau_of(b) for b in d.bins] == [0.6, 0.4, 0.2]
    assert [d.scale_of(b) for b in d.bins] == [1.0, 0.75, 0.5]
    r = c.reward_config()
    assert (r.correct, r.format_count, r.format_order, r.length_weight, r.window_size) == (
        4.0, 0.5, 0.5, 2.0, 10,
    )  # fmt: skip


def test_authors_preset_fills_only_unset_fields() -> None:
    c = make(preset="authors")
    assert (c.format_preset, c.length_weight) == ("authors", 1.0)
    # docs/method.md#probe: the authors read the first half of the layers for Qwen3, all for R1
    layers = c.traac_settings.probe_layers_for
    assert layers("qwen3") == "first_half"
    assert layers("qwen2", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B") == "all"
    assert make().traac_settings.probe_layers_for("qwen3") == "all"  # the paper's
    assert c.compression_settings("qwen3").probe_layers == "first_half"
    r = c.reward_config()
    assert (r.format_count, r.format_order, r.length_weight) == (0.25, 0.25, 1.0)
    c = make(preset="authors", length_weight=3.0, method_args={"probe_layers": "0,2"})
    s = c.method_settings
    assert (c.format_preset, c.length_weight, s.probe_layers) == ("authors", 3.0, "0,2")
    assert s.probe_layers_for("qwen3") == "0,2"
    assert c.preset_pinned == {"length_weight": "recipe", "probe_layers": "recipe"}


def test_reference_is_the_old_name_of_the_authors_preset(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="traac.compression.settings"):
        c = make(preset="reference", format_preset="reference")
    assert (c.preset, c.format_preset, c.length_weight) == ("authors", "authors", 1.0)
    warnings = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert warnings == [
        "preset: 'reference' is deprecated; it is now called 'authors'",
        "format_preset: 'reference' is deprecated; it is now called 'authors'",
    ]


@pytest.mark.parametrize(
    ("mode", "compresses", "bins", "rewards"),
    [
        ("traac", True, ("easy", "medium", "hard"), (True, True)),
        ("cr", False, (SINGLE_BIN,), (False, False)),
        ("cr_lr", False, (SINGLE_BIN,), (True, True)),
        ("compression_no_difficulty", True, (SINGLE_BIN,), (True, True)),
        # peer methods: their own length term replaces TRAAC's; bins kept for telemetry
        ("alp", False, ("easy", "medium", "hard"), (True, False)),
        ("shorterbetter", False, ("easy", "medium", "hard"), (True, False)),
        ("kimi", False, ("easy", "medium", "hard"), (True, False)),
        ("dapo_overlong", False, ("easy", "medium", "hard"), (True, False)),
        ("l1_max", False, ("easy", "medium", "hard"), (True, False)),
    ],
)
def test_modes(mode: str, compresses: bool, bins: tuple, rewards: tuple) -> None:
    c = make(mode=mode)
    d, r = c.difficulty_config(), c.mode_spec.rewards
    uses = ("format_reward" in r, "length_reward" in r)
    assert (c.compresses, d.bins, uses) == (compresses, bins, rewards)
    if bins == (SINGLE_BIN,):
        assert (d.bin_of(0.0), d.bin_of(1.0), d.tau_of(SINGLE_BIN)) == (SINGLE_BIN, SINGLE_BIN, 0.6)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("mode", "fast"),
        ("preset", "verl"),
        ("scorer", "entropy"),
        ("scoring_model", " "),
        ("step_scope", "answer"),
        ("uniformity_calibration", "auto"),
        ("chat_format", "qwen"),
        ("format_preset", "both"),
        ("uniformity_gate", 1.2),
        ("eviction_cap", -1.0),
        ("length_window_steps", 0),
        ("traac.calibration_window", 0),
        ("length_weight", -1.0),
        ("correctness_reward", -4.0),
        ("probe_layers", "first,second"),
        ("probe_layers", "-1"),
        ("split_phrases", ["Wait", " "]),
        ("aux_prompt", "  "),
        ("think_close", "<think>"),
        ("think_open", ""),
        ("learning_rate", -1e-6),
        ("temperature", 0.0),
        ("max_completion_length", 0),
        ("beta", -0.001),
        ("learning_rate", float("nan")),
        ("beta", float("nan")),
        ("correctness_reward", float("nan")),
        ("uniformity_gate", float("nan")),
        ("top_p", float("nan")),
        ("dynamic_sampling", "always"),
        ("max_resample_rounds", 0),
        ("alp.beta", 0.0),
        ("alp.normalizer", -5.0),
        ("shorterbetter.beta", float("nan")),
        ("kimi.weight", -1.0),
        ("dapo_overlong.cache_length", 20000),  # above max_completion_length
        ("l1_max.alpha", 0.0),
        ("l1_max.budget_min", 0),
        ("l1_max.budget_max", 50),  # below l1_max.budget_min
    ],
)
def test_invalid_values_name_their_field(field: str, value: object) -> None:
    """A field of the config, or a setting of a mode given in `method_args` (its block's)."""
    config = {f.name for f in dataclasses.fields(TRAACConfig)}
    mode, name = mode_of(field) if "." in field else ("traac", field)
    given = {field: value} if field in config else {"mode": mode, "method_args": {name: value}}
    with pytest.raises(TraacError) as info:
        make(**given)
    assert str(info.value).startswith(f"{field}:")


@pytest.mark.parametrize(
    ("difficulty", "message"),
    [
        ({"easy_threshold": 1.5}, "difficulty.easy_threshold:"),
        ({"medium_threshold": 0.9}, "difficulty.medium_threshold (0.9) must not exceed"),
        ({"tau": {"easy": -0.1}}, "difficulty.tau.easy -0.1: must lie in [0, 1]"),
        ({"single_tau": 2.0}, "difficulty.single_tau 2.0: must lie in [0, 1]"),
        ({"length_scale": {"hard": -0.5}}, "difficulty.length_scale.hard:"),
        ({"tau": {"extreme": 0.5}}, "difficulty.tau must give exactly easy, medium, hard"),
        ({"taus": {}}, "difficulty: unknown key(s) ['taus']"),
        ('{"tau": ', "difficulty: '{\"tau\": ' is not JSON"),
    ],
)
def test_invalid_bins_name_their_key(difficulty: object, message: str) -> None:
    with pytest.raises(TraacError) as info:
        make(difficulty=difficulty)
    assert str(info.value).startswith(message)


def test_the_bins_are_one_mapping_whose_missing_keys_keep_the_papers_values() -> None:
    config = make(difficulty={"tau": {"hard": 0.3}, "medium_threshold": 0.5})
    d = config.difficulty_config()
    assert (d.tau, d.medium_threshold, d.easy_threshold) == (
        {"easy": 0.6, "medium": 0.4, "hard": 0.3},
        0.5,
        0.8,
    )
    assert config.difficulty["tau"] == {"easy": 0.6, "medium": 0.4, "hard": 0.3}  # every key
    assert make(difficulty='{"tau": {"easy": 0.7}}').difficulty_config().tau_of("easy") == 0.7


def test_scoring_model_takes_any_model_but_not_with_the_confidence_scorer() -> None:
    assert make(method_args={"scoring_model": "smollm2"}).method_args["scoring_model"] == "smollm2"
    with pytest.raises(TraacError, match=r"^scoring_model: 'smollm2' with scorer confidence"):
        make(method_args={"scoring_model": "smollm2", "scorer": "confidence"})


def test_peer_defaults_follow_the_response_budget() -> None:
    config = make(mode="alp", max_completion_length=160)
    p = config.method_run().settings
    assert (p.beta, p.normalizer) == (1.0, 160.0)
    run = config.run_context()
    assert make(mode="dapo_overlong", max_completion_length=160).method_run().settings == (
        METHODS["dapo_overlong"].settings(cache_length=32)
    )
    assert (
        METHODS["dapo_overlong"].settings.from_mapping({}, "dapo_overlong").resolved(run)
    ).cache_length == 32
    defaults = [make(mode=m).method_settings for m in ("shorterbetter", "kimi", "l1_max")]
    assert (
        defaults[0].beta, defaults[1].weight, defaults[2].alpha, defaults[2].delta,
    ) == (0.001, 1.0, 3e-4, 0.5)  # fmt: skip
    config = make(mode="alp", method_args={"normalizer": 500.0})
    assert config.method_run().settings.normalizer == 500.0
    with pytest.raises(TraacError, match=r"^l1_max\.budget_max: 4000 exceeds max_completion"):
        make(mode="l1_max", max_completion_length=160)  # the paper's budgets cannot fit
    config = make(mode="l1_max", method_args={"budget_max": 160}, max_completion_length=160)
    assert config.method_settings.budget_max == 160


def test_traac_field_errors_are_value_errors_for_api_users() -> None:
    with pytest.raises(TRAACConfigError) as info:
        make(mode="fast")
    assert isinstance(info.value, ValueError)


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_bins_follow_the_thresholds(a: float, b: float, rate: float) -> None:
    medium, easy = sorted((a, b))
    d = make(difficulty={"easy_threshold": easy, "medium_threshold": medium}).difficulty_config()
    expected = "easy" if rate >= easy else "medium" if rate >= medium else "hard"
    assert d.bin_of(rate) == expected


def test_parser_reads_a_recipe_and_command_line_overrides(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "model_name_or_path: some/model\ndataset: testbed:easy?n=4\noutput_dir: out\n"
        "use_cpu: true\nbf16: false\nmode: traac\ndifficulty: {tau: {easy: 0.5}}\n"
        "num_generations: 4\n"
        "per_device_train_batch_size: 8\nsplit_phrases: [Wait, So]\n"
    )
    tau = ["--difficulty", '{"tau": {"easy": 0.7}}']
    assert parse(["--config", str(recipe)])[1].difficulty_config().tau_of("easy") == 0.5
    script, config = parse(["--config", str(recipe), *tau, "--traac.scorer", "random"])
    assert (script.model_name_or_path, script.dataset) == ("some/model", "testbed:easy?n=4")
    easy = config.difficulty_config().tau_of("easy")
    assert (config.mode, easy, config.method_settings.scorer) == ("traac", 0.7, "random")
    assert (config.num_generations, config.split_phrases) == (4, ["Wait", "So"])


@pytest.mark.parametrize(
    ("text", "args", "needle"),
    [
        ("mode: fast\n", [], "mode:"),
        ("no_such_field: 1\n", [], "no_such_field"),
        ("", ["--tau_hard", "3"], "tau_hard: the bins are one mapping now, difficulty.tau.hard"),
        ("tau_easy: 0.5\n", [], r"tau_easy: .*`difficulty: \{tau: \{easy: VALUE\}\}`"),
        ("", ["--length-scale-single=2"], "length_scale_single: .* difficulty.single_scale"),
    ],
)
def test_parser_errors_are_traac_errors(
    tmp_path: Path, text: str, args: list[str], needle: str
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("output_dir: out\nuse_cpu: true\nbf16: false\n" + text)
    with pytest.raises(TraacError, match=needle):
        parse(["--config", str(recipe), *args])


def test_missing_recipe_is_a_traac_error(tmp_path: Path) -> None:
    with pytest.raises(TraacError, match="no such recipe"):
        parse(["--config", str(tmp_path / "missing.yaml")])


def test_testbed_recipe_is_valid() -> None:
    script, config = parse(["--config", str(RECIPES / "testbed.yaml")])
    assert script.model_name_or_path == "testbed" and script.dataset.startswith("testbed")
    assert config.use_cpu and 0 < config.max_steps <= 200 and config.mode == "traac"
    assert config.max_completion_length <= 200
    assert config.method_settings.copy_loss == "full"  # what the testbed's figures measured


def test_smollm2_think_recipe_is_valid() -> None:
    script, config = parse(["--config", str(RECIPES / "smollm2-think.yaml")])
    assert script.model_name_or_path == "smollm2-think" and script.dataset.startswith("testbed")
    probe = config.method_settings
    assert config.use_cpu and config.mode == "traac" and probe.scoring_model == "reference"
    assert (probe.probe_layers, probe.probe_heads) == ("all", "all")  # the paper's probe
    assert (config.preset, probe.copy_loss) == ("traac", "answer_only")  # the verdict's copies
    _, paper = parse(["--config", str(RECIPES / "smollm2-think.yaml"), "--preset", "paper"])
    assert paper.method_settings.copy_loss == "full"


def test_parser_reads_the_dry_run_flags() -> None:
    script, _ = parse(["--config", str(RECIPES / "testbed.yaml"), "--dry-run"])
    assert script.dry_run and script.dry_run_processes is None
    script, _ = parse(["--config", str(RECIPES / "testbed.yaml"), "--dry_run_processes", "4"])
    assert not script.dry_run and script.dry_run_processes == 4


@pytest.mark.parametrize("name", ["activation_checkpointing", "gradient_checkpointing"])
@pytest.mark.parametrize("where", ["recipe", "command line"])
def test_either_name_of_activation_checkpointing_is_read_without_a_warning(
    tmp_path: Path, name: str, where: str
) -> None:
    """transformers 5.24 renamed gradient_checkpointing activation_checkpointing (the old name
    warns); 5.17, the gpu extra's, knows only the old one. A recipe works with either on both."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\nuse_cpu: true\n"
                      + (f"{name}: true\n" if where == "recipe" else ""))  # fmt: skip
    flags = [f"--{name}", "true"] if where == "command line" else []
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        _, config = parse(["--config", str(recipe), *flags])
    assert config.gradient_checkpointing is True  # 5.24 mirrors the new name into the old


@pytest.mark.parametrize("recipe", ["qwen3-4b.yaml", "r1-distill-qwen-7b.yaml"])
def test_paper_recipes_are_valid_where_they_run(recipe: str) -> None:
    """bf16 needs a GPU (transformers checks at parse time); with use_cpu the rest validates."""
    script, config = parse(["--config", str(RECIPES / recipe), "--use_cpu", "true"])
    assert script.dataset == "dapo-math-17k" and config.chat_format == "auto"
    assert config.bf16 and config.use_vllm and config.gradient_checkpointing
    assert (config.num_generations, config.max_completion_length) == (8, 10000)
    assert (config.mode, config.beta, config.epsilon_high) == ("traac", 0.001, 0.28)


def test_bf16_left_unset_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU computes in bf16: an unset bf16 trains in full precision, an explicit one stops in
    one line naming bf16=False (transformers' own error names neither); with one, TRL's bf16."""
    import traac.training.planning.precision as precision

    monkeypatch.setattr(precision, "is_torch_xla_available", lambda: False)
    monkeypatch.setattr(precision, "is_torch_bf16_gpu_available", lambda: False)
    assert not TRAACConfig(output_dir="unused").bf16
    assert TRAACConfig(output_dir="unused", use_cpu=True, bf16=True).bf16  # asked for, on a CPU
    with pytest.raises(TRAACConfigError, match=r"^bf16: True, .*set bf16=False") as error:
        TRAACConfig(output_dir="unused", bf16=True)
    assert "\n" not in str(error.value)
    assert not TRAACConfig(output_dir="unused", fp16=True, use_cpu=True).bf16  # TRL's rule


# At most this many fields on top of GRPOConfig's (issue 57: every run's own, and `method_args`
# for the trained mode's; 63 when every method's settings were config fields).
MAX_ADDED_FIELDS = 25


def test_the_config_adds_few_fields_to_grpo_every_run_reads() -> None:
    """Counted, so that a setting of one method made a config field again fails here."""
    grpo = {f.name for f in dataclasses.fields(GRPOConfig)}
    added = [f.name for f in dataclasses.fields(TRAACConfig) if f.name not in grpo]
    assert len(added) <= MAX_ADDED_FIELDS, added
    assert "method_args" in added
    settings = {n for m in METHODS.values() if m.settings for n in m.settings.names()}
    assert not settings & set(added)  # each method's settings live in its own class


def test_method_args_is_parsed_once_into_the_modes_settings() -> None:
    config = make(mode="alp", method_args={"beta": 0.5})
    assert config.method_settings == METHODS["alp"].settings(beta=0.5)
    assert config.method_args == {"beta": 0.5, "normalizer": None}  # every key
    assert make(mode="cr_lr").method_settings is None and make(mode="cr_lr").method_args == {}
    again = make(mode="alp", method_args=config.method_args)  # a parsed config's, as saved
    assert again.method_settings == config.method_settings


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"mode": "traac", "method_args": {"beta": 1.0}},
         "traac.beta: not a setting of mode traac; its settings are scorer, "
         "probe_layers, probe_heads,"),
        ({"mode": "kimi", "method_args": {"kimi": 1.0}},
         "kimi.kimi: not a setting of mode kimi; its settings are weight"),
        ({"mode": "cr_lr", "method_args": {"copy_loss": "answer_only"}},
         "method_args: copy_loss is not a setting of mode cr_lr, which has none"),
        ({"method_args": [1, 2]}, "method_args: [1, 2] is not a mapping of setting: value"),
        ({"method_args": '{"scorer": "random"}'},
         "method_args: '{\"scorer\": \"random\"}' is not a mapping of setting: value"),
    ],
)  # fmt: skip
def test_a_method_args_key_the_mode_lacks_is_one_line_naming_its_keys(
    given: dict, message: str
) -> None:
    with pytest.raises(TRAACConfigError) as error:
        make(**given)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("preset", ["traac", "paper", "authors"])
@pytest.mark.parametrize("mode", ["traac", "compression_no_difficulty", "cr_lr", "alp"])
def test_a_preset_fills_the_compression_settings_of_the_modes_that_have_them(
    preset: str, mode: str
) -> None:
    """As when they were config fields: probe layers, copy pool and copy loss unset are the
    preset's; a mode without them has nothing filled, and its config nothing to read."""
    config = make(mode=mode, preset=preset)
    fills = {"traac": ("all", "evicted", "answer_only"), "paper": ("all", "evicted", "full"),
             "authors": (None, "all_correct", "full")}  # fmt: skip
    s = config.traac_settings  # a mode that does not compress: the preset's defaults
    assert (s.probe_layers, s.copy_pool, s.copy_loss) == fills[preset]
    assert isinstance(config.method_settings, TraacSettings) == config.compresses
    if config.compresses:
        pinned = make(mode=mode, preset=preset, method_args={"copy_pool": "all_correct"})
        assert pinned.preset_pinned["copy_pool"] == "recipe"
        assert pinned.method_settings.copy_pool == "all_correct"


def test_from_recipe_takes_the_modes_block_and_checks_the_others() -> None:
    given = TRAACConfig.from_recipe(output_dir="unused", use_cpu=True, bf16=False, mode="alp",
                                    alp={"beta": 0.5}, traac={"scorer": "random"})  # fmt: skip
    assert given.method_settings == make(mode="alp", method_args={"beta": 0.5}).method_settings
    with pytest.raises(TRAACConfigError, match=r"^alp\.scorer: not a setting of mode alp; its"):
        TRAACConfig.from_recipe(output_dir="unused", mode="alp", alp={"scorer": "random"})
    with pytest.raises(TraacError, match=r"^alp\.beta: -1 must be a finite number > 0"):
        TRAACConfig.from_recipe(output_dir="unused", use_cpu=True, bf16=False, alp={"beta": -1})
