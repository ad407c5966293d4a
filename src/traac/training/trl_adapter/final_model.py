"""What a finished `TRAACTrainer.train()` leaves in `output_dir`, as `traac train` does: the
model (or LoRA adapter), its tokenizer and a model card that names TRAAC, its paper and the
base model.

TRL's trainers describe themselves through class attributes (`_tag_names`, `_name`, `_paper`)
read by `create_model_card`, which `_save_checkpoint` and `push_to_hub` call. TRL's card links
the base model on the hub, which prints "[None](https://huggingface.co/None)" for a local
directory and a dead link for a name traac builds offline (`testbed`); the card here is written
with huggingface_hub's `ModelCard.from_template` and links the base only when it is a hub id.
"""

from __future__ import annotations

import textwrap
from importlib.metadata import version
from pathlib import Path
from typing import Any, ClassVar

from huggingface_hub import ModelCard, ModelCardData
from trl import GRPOTrainer
from trl.trainer.utils import get_config_model_id

PAPER_ID = "2510.01581"
PAPER_TITLE = (
    "Think Right: Learning to Mitigate Under-Over Thinking via Adaptive, Attentive Compression"
)
CITATION = textwrap.dedent(f"""\
    @article{{singh2025thinkright,
        title         = {{{{{PAPER_TITLE}}}}},
        author        = {{Joykirat Singh and Justin Chih-Yao Chen and Archiki Prasad and Elias Stengel-Eskin and Akshay Nambi and Mohit Bansal}},
        year          = 2025,
        eprint        = {{arXiv:{PAPER_ID}}},
    }}""")  # noqa: E501

_TEMPLATE = """\
---
{{ card_data }}
---

# {{ model_name }}

This model is {{ base }}, trained with TRAAC (Think Right with Adaptive, Attentive
Compression), the method of [{{ paper_title }}](https://arxiv.org/abs/{{ paper_id }}):
GRPO in which each prompt's pass rate sets its difficulty, the right rollouts' reasoning is
pruned by attention (more on easier prompts) and re-answered, and a difficulty-aware length
reward is added to correctness and format. It was trained with traac, which runs TRAAC on
[TRL](https://github.com/huggingface/trl)'s `GRPOTrainer`{% if dataset_name %}, on
`{{ dataset_name }}`{% endif %}.

## Quick start

```python
from transformers import pipeline

generator = pipeline("text-generation", model="{{ model_id }}")
messages = [{"role": "user", "content": "What is 4 + 1?"}]
print(generator(messages, max_new_tokens=256, return_full_text=False)[0]["generated_text"])
```

## Training procedure

Mode `{{ mode }}`, GRPO steps: {{ steps }}, rollouts per prompt: {{ num_generations }}; each
step's telemetry (pass rates, bins, compression, rewards) is in `metrics.jsonl` beside the
weights.

### Framework versions

{% for name, number in versions %}- {{ name }}: {{ number }}
{% endfor %}
## Citations

Cite TRAAC as:

```bibtex
{{ citation }}
```

TRAAC trains with GRPO:

```bibtex
{{ grpo_citation }}
```
"""


def describe_base(given: str | None, loaded: str | None) -> tuple[str, str | None]:
    """(the card's words for the base model, its hub id or None). `given` is what the trainer
    was handed as `model` (a name, directory or hub id), `loaded` the path or id it loaded."""
    name = given or loaded
    if not name:
        return "a fine-tuned model", None
    if Path(name).expanduser().is_dir():
        return f"a fine-tune of the local model `{name}`", None
    if loaded and loaded != name and Path(loaded).is_dir():  # a name traac resolved to a build
        return (f"a fine-tune of `{name}`, a model traac builds offline "
                f'(`traac.resolve_model("{name}")`)'), None  # fmt: skip
    return f"a fine-tune of [{name}](https://huggingface.co/{name})", name


class FinalModel:
    """Mixed into `TRAACTrainer` before TRL's `GRPOTrainer`: `train()` saves the model and its
    card into `output_dir` when it finishes (not when SIGINT/SIGTERM stopped it: that
    checkpoint is the output), and the card every save writes is TRAAC's."""

    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "traac"]
    _name = "TRAAC"
    _paper: ClassVar[dict[str, str]] = {"title": PAPER_TITLE, "id": PAPER_ID, "citation": CITATION}
    base_model_name: str | None = None  # the `model` argument as given, before it was resolved

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """`Trainer.train`, then the model, tokenizer and card saved to `output_dir`."""
        output = super().train(*args, **kwargs)  # type: ignore[misc]
        if getattr(self, "interrupted", None) is None:
            self.save_model()  # type: ignore[attr-defined]  # every process: ZeRO-3/FSDP gather
            self.create_model_card(model_name=self._card_model_name())
        return output

    def _card_model_name(self) -> str:
        args: Any = self.args  # type: ignore[attr-defined]
        return (args.hub_model_id or args.output_dir).rstrip("/").split("/")[-1]

    def create_model_card(
        self,
        model_name: str | None = None,
        dataset_name: str | None = None,
        tags: str | list[str] | None = None,
    ) -> None:
        """TRL's hook, with TRAAC's card written to `output_dir/README.md` by the main process."""
        trainer: Any = self
        if not trainer.is_world_process_zero():
            return
        base, hub_id = describe_base(
            self.base_model_name, get_config_model_id(trainer.model.config)
        )
        extra = [tags] if isinstance(tags, str) else list(tags or [])
        data = ModelCardData(
            base_model=hub_id,
            datasets=dataset_name,
            library_name="transformers",
            model_name=model_name,
            tags=["generated_from_trainer", *self._tag_names, *extra],
        )
        args = trainer.args
        packages = ("traac", "trl", "transformers", "torch", "datasets", "tokenizers")
        card = ModelCard.from_template(
            data,
            template_str=_TEMPLATE,
            model_name=model_name or self._card_model_name(),
            base=base,
            paper_title=PAPER_TITLE,
            paper_id=PAPER_ID,
            dataset_name=dataset_name,
            model_id=args.hub_model_id or args.output_dir,
            mode=args.mode,
            steps=trainer.state.global_step,
            num_generations=args.num_generations,
            versions=[(name, version(name)) for name in packages],
            citation=CITATION,
            grpo_citation=GRPOTrainer._paper["citation"],
        )
        card.save(str(Path(args.output_dir) / "README.md"))
