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

from datasets import Dataset
from trl.trainer.utils import get_config_model_id

from traac.common.model_names import resolve_name
from traac.common.models import load_tokenizer
from traac.data.training import check_rows, training_rows
from traac.errors import TraacError
from traac.training.planning.traac_config import TRAACConfig


def check_inputs(model: Any, train_dataset: Any, eval_dataset: Any) -> None:
    """The arguments' kinds and the datasets' rows (`check_rows`: none, or one without a
    question or an answer), named in one line before anything loads: TRL would otherwise fail
    on them minutes later (a list has no `column_names`), or train on them after loading the
    model (an empty set "trained 0 steps, model saved")."""
    import torch.nn as nn

    if not isinstance(model, (str, nn.Module)):
        raise TraacError(f"model: {model!r} is of type {type(model).__name__}; pass a model "
                         "name traac knows (testbed, smollm2, ...), a directory or hub id, or a "
                         "model object")  # fmt: skip
    _check_dataset("train_dataset", train_dataset)
    check_rows(train_dataset, "train_dataset")
    parts = eval_dataset.items() if isinstance(eval_dataset, dict) else [(None, eval_dataset)]
    for key, part in parts:
        name = "eval_dataset" if key is None else f"eval_dataset[{key!r}]"
        _check_dataset(name, part)
        check_rows(part, name)


def _check_dataset(name: str, dataset: Any) -> None:
    if dataset is None or isinstance(dataset, Dataset):
        return
    kind = type(dataset).__name__
    if isinstance(dataset, dict):  # a DatasetDict, or rows by column
        fix = "pass one split, e.g. dataset['train']" if dataset else "pass a datasets.Dataset"
    elif isinstance(dataset, (list, tuple)):
        fix = "pass datasets.Dataset.from_list(rows)"
    else:
        fix = "pass a datasets.Dataset (Dataset.from_list(rows), or load_dataset(...)[split])"
    raise TraacError(f"{name}: of type {kind}; traac trains on a datasets.Dataset: {fix}")


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
    run = args.method_run()
    if run is not None and train_dataset is not None:
        train_dataset = run.prepare(train_dataset, args.seed)
    return model, train_dataset, kwargs
