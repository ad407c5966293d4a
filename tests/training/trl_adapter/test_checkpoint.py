"""A resume is checked against the settings its checkpoint trained with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac.errors import TraacError
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.checkpoint import SETTINGS, STATE_FILE, check_resumable


def test_a_peers_checkpoint_saved_with_its_flat_names_resumes_under_its_block(
    tmp_path: Path,
) -> None:
    """A peer's `method_args` saved before the blocks (`alp_beta`) is the same run as today's
    (`beta`), so its resume goes on; a value that differs is still refused."""
    config = TRAACConfig(output_dir=str(tmp_path), use_cpu=True, mode="alp",
                         method_args={"beta": 0.5})  # fmt: skip
    for beta, refused in ((0.5, False), (1.0, True)):
        state = {SETTINGS: {"mode": "alp", "method_args": {"alp_beta": beta,
                                                           "alp_normalizer": None}}}  # fmt: skip
        (tmp_path / STATE_FILE).write_text(json.dumps(state))
        if refused:
            with pytest.raises(TraacError, match=r"^resume_from_checkpoint: .* method_args"):
                check_resumable(str(tmp_path), config)
        else:
            check_resumable(str(tmp_path), config)
