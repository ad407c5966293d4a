"""What a finished `TRAACTrainer.train()` leaves in `output_dir`: a model `from_pretrained`
loads, its tokenizer, and a card naming TRAAC, its paper and the base model (the run itself is
the README's quickstart, `tests/test_docs.py`; here the card's words for each kind of base)."""

from __future__ import annotations

from pathlib import Path

from traac.training.trl_adapter.final_model import PAPER_ID, describe_base
from traac.training.trl_adapter.trainer import TRAACTrainer


def test_the_base_model_is_named_for_what_it_is(tmp_path: Path) -> None:
    hub = describe_base("Qwen/Qwen3-4B", "Qwen/Qwen3-4B")
    assert hub == ("a fine-tune of [Qwen/Qwen3-4B](https://huggingface.co/Qwen/Qwen3-4B)",
                   "Qwen/Qwen3-4B")  # fmt: skip
    words, hub_id = describe_base("testbed-quick", str(tmp_path))  # a name traac built
    assert hub_id is None and "`testbed-quick`, a model traac builds offline" in words
    words, hub_id = describe_base(str(tmp_path), str(tmp_path))
    assert hub_id is None and words == f"a fine-tune of the local model `{tmp_path}`"
    words, hub_id = describe_base(None, str(tmp_path))  # a model object loaded from a directory
    assert hub_id is None and str(tmp_path) in words
    assert describe_base(None, None) == ("a fine-tuned model", None)


def test_the_trainer_describes_itself_as_traac_to_trl() -> None:
    """TRL's hooks read these: the tags, the name and the paper of `push_to_hub`'s card."""
    assert TRAACTrainer._name == "TRAAC" and "traac" in TRAACTrainer._tag_names
    assert TRAACTrainer._paper["id"] == PAPER_ID == "2510.01581"
    assert "Think Right" in TRAACTrainer._paper["title"]
    assert "Joykirat Singh" in TRAACTrainer._paper["citation"]
