from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from traac.common import threads
from traac.common.models import load_model
from traac.common.threads import set_threads
from traac.errors import TraacError


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Start each case from torch's default on a 2-core machine, with no OMP_NUM_THREADS."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_small_model_on_the_cpu_gets_one_thread(two_threads: None) -> None:
    assert set_threads(None, model=torch.nn.Linear(4, 4)) == 1


def test_the_users_count_wins(two_threads: None) -> None:
    assert set_threads(2, model=torch.nn.Linear(4, 4)) == 2
    assert set_threads(3) == 3


def test_omp_num_threads_is_left_to_torch(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert set_threads(None, model=torch.nn.Linear(4, 4)) == 2


def test_large_or_off_cpu_models_keep_the_default(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads, "SMALL_MODEL_PARAMETERS", 10)
    assert set_threads(None, model=torch.nn.Linear(4, 4)) == 2  # 20 parameters
    monkeypatch.setattr(threads, "SMALL_MODEL_PARAMETERS", 10**9)
    assert set_threads(None, model=torch.nn.Linear(4, 4, device="meta")) == 2
    assert set_threads(None) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_count_names_the_field(bad: object) -> None:
    with pytest.raises(TraacError, match="num_threads"):
        set_threads(bad)  # type: ignore[arg-type]


def test_loading_a_tiny_model_sets_one_thread(
    two_threads: None, tmp_path: Path, char_tokenizer: Callable, save_tiny: Callable
) -> None:
    path = save_tiny(tmp_path / "tiny", char_tokenizer())
    load_model(str(path), device="cpu")
    assert torch.get_num_threads() == 1
