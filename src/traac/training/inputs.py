"""What `TRAACTrainer` takes beyond `GRPOTrainer`: the names and rows its users already have.

- `model` may be a name traac knows (`testbed`, `testbed-quick`, `smollm2`, `smollm2-think`, a
  `.gguf` file), resolved as `--model` is on the command line (`traac.common.model_names`; the
  trainer resolves `scoring_model` the same way, `traac.common.scoring_model`);
- datasets may have TRL's and open-r1's layout, `prompt` (text or chat messages) with `answer`
  or `solution`, or any layout `traac train --dataset` reads from a file (`problem` with
  `solution`, ...), prompted as chat messages when the model has a chat template
  (`traac.data.training.training_rows`);
- a peer method prepares the training rows it needs (L1-Max: each row's length budget,
  `traac.training.methods.l1_max.with_length_budgets`).
"""

from __future__ import annotations

from typing import Any

from trl.trainer.utils import get_config_model_id

from traac.common.model_names import resolve_name
from traac.common.models import load_tokenizer
from traac.data.training import training_rows
from traac.training.config import TRAACConfig


def trainer_inputs(
    model: Any, args: TRAACConfig, train_dataset: Any, kwargs: dict[str, Any]
) -> tuple[Any, Any, dict[str, Any]]:
    """`model`, `train_dataset` and the keyword arguments (`eval_dataset`) as `GRPOTrainer`
    takes them."""
    if isinstance(model, str):
        model = resolve_name(model)

    def conversational() -> bool:  # asked only of rows that need a prompt made
        tokenizer = kwargs.get("processing_class")
        if tokenizer is None:
            tokenizer = load_tokenizer(model if isinstance(model, str) else
                                       get_config_model_id(model.config))  # fmt: skip
        return bool(getattr(tokenizer, "chat_template", None))

    train_dataset = training_rows(train_dataset, conversational=conversational)
    if kwargs.get("eval_dataset") is not None:
        held_out = training_rows(kwargs["eval_dataset"], "eval_dataset", conversational)
        kwargs = {**kwargs, "eval_dataset": held_out}
    if args.peer_mode and train_dataset is not None:
        train_dataset = args.peer_settings().prepare(train_dataset, args.seed)
    return model, train_dataset, kwargs
