import pytest
from hypothesis import given
from hypothesis import strategies as st

from traac.compression.difficulty import SINGLE_BIN, DifficultySettings, group_pass_rates, pass_rate
from traac.errors import TraacError


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (1.0, "easy"),
        (0.8, "easy"),
        (0.79, "medium"),
        (0.3, "medium"),
        (0.29, "hard"),
        (0.0, "hard"),
    ],
)
def test_bins_at_the_default_thresholds(rate, expected):
    assert DifficultySettings().bin_of(rate) == expected


def test_tau_and_scale_per_bin():
    cfg = DifficultySettings()
    assert [cfg.tau_of(b) for b in cfg.bins] == [0.6, 0.4, 0.2]
    assert [cfg.scale_of(b) for b in cfg.bins] == [1.0, 0.75, 0.5]
    # 8 rollouts, 5 right: pass rate 0.625 -> medium -> tau 0.4, scale 0.75
    b = cfg.bin_of(pass_rate([True] * 5 + [False] * 3))
    assert (b, cfg.tau_of(b), cfg.scale_of(b)) == ("medium", 0.4, 0.75)


def test_no_difficulty_mode_has_one_bin():
    cfg = DifficultySettings(enabled=False)
    assert cfg.bins == (SINGLE_BIN,)
    assert {cfg.bin_of(r) for r in (0.0, 0.5, 1.0)} == {SINGLE_BIN}
    assert cfg.tau_of(SINGLE_BIN) == 0.6 and cfg.scale_of(SINGLE_BIN) == 1.0


def test_custom_thresholds_and_tables():
    cfg = DifficultySettings(
        easy_threshold=0.5,
        medium_threshold=0.5,
        tau={"easy": 0.5, "medium": 0.5, "hard": 0.0},
        length_scale={"easy": 2.0, "medium": 1.0, "hard": 0.0},
    )
    assert cfg.bin_of(0.5) == "easy" and cfg.bin_of(0.49) == "hard"
    assert cfg.scale_of("easy") == 2.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"easy_threshold": 1.2}, "difficulty.easy_threshold"),
        ({"medium_threshold": -0.1}, "difficulty.medium_threshold"),
        ({"easy_threshold": 0.3, "medium_threshold": 0.5}, "difficulty.medium_threshold"),
        ({"tau": {"easy": 0.6, "medium": 0.4}}, "difficulty.tau"),
        ({"tau": {"easy": 0.6, "medium": 1.4, "hard": 0.2}}, "difficulty.tau.medium"),
        ({"length_scale": {"easy": 1, "medium": -1, "hard": 0}}, "difficulty.length_scale.medium"),
        ({"single_tau": 2.0}, "difficulty.single_tau"),
        ({"easy_threshold": "high"}, "difficulty.easy_threshold"),
    ],
)
def test_validation_names_the_field(kwargs, field):
    with pytest.raises(TraacError, match=field.replace(".", r"\.")):
        DifficultySettings(**kwargs)


def test_from_recipe_fills_what_is_left_out_and_rejects_unknown_keys():
    assert DifficultySettings.from_recipe({}, enabled=False).bins == (SINGLE_BIN,)
    d = DifficultySettings.from_recipe({"length_scale": {"medium": 0.6}, "single_tau": 0.5})
    assert (d.scale_of("medium"), d.scale_of("hard"), d.single_tau) == (0.6, 0.5, 0.5)
    assert DifficultySettings.from_recipe(d.to_recipe()) == d
    with pytest.raises(TraacError, match="taus"):
        DifficultySettings.from_recipe({"taus": {}})
    with pytest.raises(TraacError, match="enabled"):
        DifficultySettings.from_recipe({"enabled": False})  # the training mode's to say
    with pytest.raises(TraacError, match=r"difficulty\.tau: 0\.5 is not a mapping"):
        DifficultySettings.from_recipe({"tau": 0.5})


def test_bad_inputs():
    cfg = DifficultySettings()
    with pytest.raises(TraacError, match="pass rate"):
        cfg.bin_of(1.5)
    with pytest.raises(TraacError, match="unknown difficulty bin"):
        cfg.tau_of("trivial")
    with pytest.raises(TraacError, match="empty group"):
        pass_rate([])
    with pytest.raises(TraacError, match="groups of 4"):
        group_pass_rates([True] * 6, 4)


def test_group_pass_rates():
    correct = [True, True, False, False, True, True, True, True]
    assert group_pass_rates(correct, 4) == [0.5] * 4 + [1.0] * 4


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_bins_are_monotone_in_the_pass_rate(a, b, rate):
    cfg = DifficultySettings(easy_threshold=max(a, b), medium_threshold=min(a, b))
    order = {"hard": 0, "medium": 1, "easy": 2}
    higher = min(1.0, rate + 0.1)
    assert order[cfg.bin_of(rate)] <= order[cfg.bin_of(higher)]
