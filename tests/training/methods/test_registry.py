"""The registry is the one table: every method's settings are its `method_args`, a recipe's block
named for its mode, every method is a mode, and its variants are `experiment compare`'s."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.pipelines.recipe import flat_names
from traac.pipelines.recipe_fields import declared_blocks, declared_fields
from traac.pipelines.variants import COMPARE
from traac.training.methods.base import LengthMethod, RunContext, RunRule
from traac.training.methods.registry import (
    METHODS,
    blocks,
    check_unused,
    flat_form,
    parse_settings,
    spellings,
    split_blocks,
)
from traac.training.methods.traac import TraacMethod, TraacSettings
from traac.training.step.copy_rules import CopySettings

RUN = RunContext(correctness_reward=4.0, max_completion_length=160, easy_threshold=0.8)


def test_every_settings_class_is_one_block_named_for_a_mode_that_reads_it() -> None:
    """And the blocks, their flat prefixes and names read off the sources (the check before the
    imports) are the registry's."""
    for block, cls in blocks().items():
        assert METHODS[block].settings is cls
    assert declared_blocks() == spellings()
    assert spellings()["alp"] == ("alp_", METHODS["alp"].settings.names())


def test_each_flat_name_of_before_the_blocks_is_one_setting_and_no_field() -> None:
    """The settings' flat names (TRAAC's compression unprefixed; the peers' prefixed), each
    refused naming its block; none is a field of the parser, which it would shadow."""
    flat = flat_names(spellings())
    assert flat["alp_beta"] == "alp.beta" and flat["scorer"] == "traac.scorer"
    assert flat["lcr1_length_coef"] == "lc_r1.length_coef"
    assert not flat.keys() & set(declared_fields() or ())
    assert not blocks().keys() & set(declared_fields() or ())


def test_run_keys_hash_the_flat_names_a_block_had() -> None:
    nested = {"mode": "alp", "seed": 0, "alp": {"beta": 2.0}, "traac": {"scorer": "random"}}
    assert flat_form(nested) == {"mode": "alp", "seed": 0, "alp_beta": 2.0, "scorer": "random"}
    assert flat_form(flat_form(nested)) == flat_form(nested)


def test_the_compressing_modes_settings_are_declared_where_the_commands_take_them() -> None:
    """TraacSettings takes over CompressionSettings' fields (but the shared split_phrases) and
    CopySettings', each with its owner's default and help: one definition."""
    own = {f.name: f for f in dataclasses.fields(TraacSettings)}
    for owner in (CompressionSettings, CopySettings):
        for f in dataclasses.fields(owner):
            if f.name == "split_phrases":
                assert f.name not in own  # every run's: TRAACConfig's
                continue
            assert (own[f.name].default, own[f.name].metadata) == (f.default, f.metadata)
    assert [n for n, m in METHODS.items() if m.settings is TraacSettings] == [
        "traac", "compression_no_difficulty",
    ]  # fmt: skip


def test_blocks_split_into_the_modes_own_and_the_other_modes() -> None:
    values = {"traac": {"scorer": "random"}, "alp": {"beta": 2.0, "x": 1}, "dler": {"length": 64}}
    own, others = split_blocks(values, "alp")
    assert own == {"beta": 2.0, "x": 1}  # a key the mode lacks: the parse names it
    assert others == {TraacSettings: {"scorer": "random"}, METHODS["dler"].settings: {"length": 64}}
    own, others = split_blocks(values, "dler_difficulty")  # reads dler's block
    assert own == {"length": 64}
    own, others = split_blocks(values, "cr_lr")  # a mode with no settings of its own
    assert own == {} and set(others) == {
        TraacSettings,
        METHODS["alp"].settings,
        METHODS["dler"].settings,
    }


@pytest.mark.parametrize(
    ("mode", "values", "message"),
    [
        ("alp", {"scorer": "random"}, "alp.scorer: not a setting of mode alp; its "
         "settings are beta, normalizer"),
        ("cr_lr", {"copy_loss": "full"}, "method_args: copy_loss is not a setting of mode "
         "cr_lr, which has none"),
        ("traac", {"scorer": "entropy"}, "scorer: 'entropy' is not one of"),
        ("alp", {"beta": "a lot"}, "alp.beta: 'a lot' must be a number"),
        ("l1_max", {"budget_in_prompt": "maybe"}, "l1_max.budget_in_prompt: 'maybe' must be "
         "true or false"),
    ],
)  # fmt: skip
def test_a_modes_settings_are_parsed_once_naming_what_is_wrong(
    mode: str, values: dict, message: str
) -> None:
    with pytest.raises(TraacError) as error:
        parse_settings(mode, values, RUN)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_settings_written_as_text_are_read_as_their_types() -> None:
    """A YAML `1e-4` is text, and so is every option's value: one coercer reads them."""
    alp = parse_settings("alp", {"beta": "1e-4"}, RUN)
    l1 = parse_settings("l1_max", {"budget_in_prompt": "false", "budget_max": "160"}, RUN)
    assert (alp.beta, l1.budget_in_prompt, l1.budget_max) == (1e-4, False, 160)
    assert parse_settings("cr", {}, RUN) is None


def test_another_modes_settings_are_checked_though_unused() -> None:
    check_unused({TraacSettings: {"scorer": "random"}}, RUN)
    with pytest.raises(TraacError, match=r"^alp\.beta: -1 must be a finite number > 0"):
        check_unused({METHODS["alp"].settings: {"beta": -1}}, RUN)


def test_every_peer_is_a_mode_and_its_variants_are_compared() -> None:
    for name, method in METHODS.items():
        if isinstance(method, TraacMethod):  # TRAAC's own: their variants are variants.py's
            assert not method.compare
            continue
        assert method.rewards[2:] == ((method.reward,) if method.reward else ())
        assert method.compare, name
        for label, fields in method.compare:
            assert COMPARE[label] == fields and fields["mode"] == name


def test_a_block_or_a_flat_name_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = type("Twin", (METHODS["kimi"].settings,), {"BLOCK": "alp", "FLAT_PREFIX": "k_"})
    monkeypatch.setitem(METHODS, "twin", dataclasses.replace(METHODS["alp"], settings=twin))
    with pytest.raises(TypeError, match="two settings classes declare one block"):
        blocks()
    twin.BLOCK, twin.FLAT_PREFIX = "twin", "kimi_"
    with pytest.raises(TypeError, match="two settings share one flat name"):
        flat_names(spellings())


def config(**fields: object) -> object:
    from traac.training.planning.traac_config import TRAACConfig

    return TRAACConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none",
                       num_generations=4, per_device_train_batch_size=4, **fields)  # fmt: skip


def test_a_method_declares_the_run_settings_it_needs_and_those_that_cancel_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rules live on the method's registry entry and `TRAACConfig` enforces them, so a new
    method states its own: one given here to ALP is refused, naming the field, the mode, why and
    the fix; a value it needs, left unset, is filled (issue 72, kind 1)."""
    rule = RunRule("beta", "no KL, no reference", "set beta above 0", cancels=(0.0,))
    monkeypatch.setitem(METHODS, "alp", dataclasses.replace(METHODS["alp"], rules=(rule,)))
    with pytest.raises(TraacError, match=r"^beta: 0\.0 cancels mode alp: no KL, no reference; "
                       r"set beta above 0$"):  # fmt: skip
        config(mode="alp", beta=0.0)
    assert config(mode="kimi", beta=0.0).beta == 0.0  # another mode's rules are not ALP's
    needs = RunRule("loss_type", "w", "set loss_type dr_grpo", needs="dr_grpo")
    monkeypatch.setitem(METHODS, "alp", dataclasses.replace(METHODS["alp"], rules=(needs,)))
    assert config(mode="alp").loss_type == "dr_grpo"
    with pytest.raises(TraacError, match=r"^loss_type: 'grpo' \(optimizer_profile grpo's\) "
                       r"cancels mode alp: w; drop optimizer_profile grpo$"):  # fmt: skip
        config(mode="alp", optimizer_profile="grpo")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"mode": "ddca", "scale_rewards": "batch"}, r"^scale_rewards: 'batch' cancels mode ddca"),
        ({"mode": "arlcp", "scale_rewards": "group"}, r"^scale_rewards: 'group' cancels mode arl"),
        ({"mode": "dot", "dynamic_sampling": "drop"}, r"^dynamic_sampling: 'drop' cancels mode d"),
        ({"mode": "dot", "optimizer_profile": "dler"}, r"'resample' \(optimizer_profile dler's\)"),
        ({"mode": "adaptthink", "use_vllm": True}, r"^use_vllm: true cancels mode adaptthink"),
        ({"mode": "adaptthink", "method_args": {"share": 0.1}},
         r"^adaptthink\.share: 0.1 of num_generations=4 rounds to 0, so no rollout starts"),
    ],
)  # fmt: skip
def test_the_peers_rules_are_the_python_apis_too(fields: dict, expected: str) -> None:
    with pytest.raises(TraacError, match=expected):
        config(**fields)


def test_ddca_and_arlcp_train_unscaled_where_scale_rewards_is_unset() -> None:
    """The plan showed `scale_rewards group` and TRL divided DDCA's advantage again."""
    for mode in ("ddca", "arlcp"):
        assert config(mode=mode).scale_rewards == "none"
    assert config(mode="alp").scale_rewards == "group"  # the profile's, for the others
    assert config(mode="ddca", scale_rewards="none").scale_rewards == "none"


PEER_DOCS = Path(__file__).resolve().parents[3] / "docs" / "peer_methods.md"


def settings_table() -> dict[str, tuple[str, str]]:
    """docs/peer_methods.md's table of the modes' settings: each mode's reward name and the text
    of its settings with their defaults."""
    rows = {}
    for line in PEER_DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].strip("`") in METHODS:
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_the_docs_settings_table_names_each_peer_its_reward_and_its_defaults() -> None:
    """Every peer with a length term has a row; a setting the row names reads its dataclass
    default after its name (a slash joins names that share what follows), `unset` or `=` for
    one the run resolves; every setting is named in a row of a mode it belongs to."""
    table = settings_table()
    named: set[str] = set()
    for name, method in METHODS.items():
        if not isinstance(method, LengthMethod) or method.reward is None:
            continue
        assert name in table, f"docs/peer_methods.md: no row for mode {name}"
        reward, text = table[name]
        assert reward.split()[0] == f"`{method.reward}`", name
        for f in dataclasses.fields(method.settings):
            found = re.search(rf"`{f.name}`((?:/`\w+`)*) (\S+)", text)
            if found is None:
                continue
            named.add(f.name)
            after = found.group(2).rstrip(",;")
            if f.default is None:
                assert after in ("unset", "unset:", "="), f"{name}: {f.name} {after}"
            else:
                assert after == shown(f.default), f"{name}: {f.name} {after} != {f.default}"
    peers = {m.settings for m in METHODS.values() if isinstance(m, LengthMethod) and m.reward}
    missing = {f.name for cls in peers for f in dataclasses.fields(cls)} - named
    assert missing == set(), f"docs/peer_methods.md's table lacks {sorted(missing)}"
