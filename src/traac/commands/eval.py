"""`traac eval`: accuracy and thinking length of a model on a benchmark, or of responses made
elsewhere, the way the paper reports them (docs/method.md#evaluation)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from traac.commands import (
    MODEL_HELP,
    ArgumentParser,
    add_compress_tau,
    add_device_map,
    add_scoring_model,
    check_count,
    check_input,
    check_model,
    check_placement,
    check_test_time_scorer,
    settings_from,
)
from traac.common.sampling import check_sampling
from traac.compression.settings import CompressionSettings, FormatSettings, check_compression_read
from traac.errors import TraacError
from traac.evaluation.harness.paper_metrics import OTB_SCORINGS, PAPER_T_MAX
from traac.evaluation.harness.prompts import PROMPT_STYLES, default_prompt_style
from traac.evaluation.inference.engines import BACKENDS, BATCHINGS, CALL_REQUESTS

# Every option is checked before anything heavy is imported (`check_args`); the model stack (the
# testbed's builder, the probe, test-time thinking, vLLM) is imported where a model is named:
# scoring a responses file, or re-reporting a run, reads none of it (seconds of imports in a
# fresh process, `benchmarks/rereport.py`).

DESCRIPTION = """\
Evaluate a model on a dataset (samples.jsonl, summary.json, summary.md in --output), or score a
responses file (JSONL: id, response[, sample]) with no model. Rerunning into the same --output
resumes: finished samples are kept, missing ones are made; rerunning a finished run rewrites its
summary (avg@k, pass@k, maj@k, lengths, overthinking) from samples.jsonl without generating.

datasets: a .json/.jsonl/.parquet file; testbed:easy|medium|hard|all[?n=&seed=];
reasoning-gym:TASK[?size=&seed=]; otb-underthink[?n=&seed=]; otb-overthink; otb (both halves,
F1, and the official math rows where the hub cache has them); aime, amc, gpqa-diamond, bbeh,
bbeh-full, bbh, supergpqa, dapo-math-17k or a hub id.

The compression options (--scorer ... --confidence-top-k) act with --compress-tau; --aux-prompt
also with --think-budget."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        CompressionSettings,
        FormatSettings,
        prog="traac eval",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", required=True, help="what to evaluate on (see above)")
    p.add_argument(
        "--output", required=True, type=Path, help="run directory (created; resumed if present)"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help=MODEL_HELP)
    source.add_argument(
        "--responses", type=Path, help="score this JSONL of responses instead of generating"
    )
    p.add_argument(
        "--tokenizer",
        help="with --responses: lengths in this tokenizer's tokens (default: whitespace words)",
    )
    p.add_argument(
        "--num-samples", type=int, help="samples per item (default 5; --responses: all in the file)"
    )
    p.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1.0)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=10000,
        help="response budget in tokens (default 10000, the paper's); AUC_OAA's t_max is "
        "--t-max, not this",
    )
    p.add_argument(
        "--t-max",
        type=int,
        help=f"t_max of AUC_OAA in think tokens (default {PAPER_T_MAX}, the paper's; needs "
        "lengths in tokens: a model, or --tokenizer with --responses)",
    )
    p.add_argument(
        "--otb-scoring",
        choices=OTB_SCORINGS,
        help="OptimalThinkingBench O, U and F1, on a dataset with both its halves (otb): paper "
        "(the default: AUC_OAA at --t-max over responses, full credit) or official "
        "(facebookresearch/RAM projects/otb: per question, T = 1000, partial credit; needs a "
        "tokenizer); docs/evaluation.md",
    )
    p.add_argument(
        "--batch-size", type=int, default=8, help="prompts per generation batch (default 8)"
    )
    p.add_argument(
        "--batching",
        choices=BATCHINGS,
        default="padded",
        help="transformers backend: padded (a batch decodes until its longest response ends) "
        "or refill (a row whose response ends takes the next prompt: faster on uneven "
        "lengths, the same per-request samples)",
    )
    p.add_argument(
        "--prompt-style",
        choices=list(PROMPT_STYLES),
        help="baseline prompt (default: the style the model was trained with, if its config "
        "says; think for a chat template without a think block; else base)",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="transformers",
        help=f"generation engine (vllm takes up to {CALL_REQUESTS} requests a call, whatever "
        "--batch-size)",
    )
    vllm = p.add_argument_group("vLLM engine (with --backend vllm)")
    vllm.add_argument(
        "--tensor-parallel-size", type=int, help="GPUs each model is split across (default 1)"
    )
    vllm.add_argument(
        "--max-model-len", type=int, help="prompt + response tokens (default: the model's)"
    )
    vllm.add_argument(
        "--gpu-memory-utilization",
        type=float,
        help="share of each GPU for weights and KV cache (default 0.9)",
    )
    p.add_argument("--limit", type=int, help="only the first K items")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    add_compress_tau(
        p,
        "test-time compression: think, prune the least attended steps at this tau, answer "
        "from the rest (the paper's test-time variant: 0.4); samples record the tokens saved",
    )
    p.add_argument(
        "--think-budget",
        dest="think_budget",
        type=int,
        metavar="B",
        help="interrupt a think block at B tokens the paper's way (the auxiliary prompt and the "
        "closer are appended) and let the model answer; with --compress-tau the interrupted "
        "reasoning is pruned first, so the answer reads its key steps",
    )
    add_scoring_model(
        p,
        "with --compress-tau: the model whose attention scores the steps (default: --model "
        "itself; beyond the paper, any model: steps map to its tokenizer through character "
        "offsets, and the probe re-runs after decoding)",
    )
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    add_device_map(p)
    p.add_argument(
        "--dtype", help="float32, bfloat16, float16 (default: bfloat16 on GPU, float32 on CPU)"
    )
    return p


# Options only generation reads: with --responses, nothing is generated.
_GENERATION = ("temperature", "top_p", "seed", "batch_size", "batching")


def check_args(args: argparse.Namespace) -> None:
    """Every option that can be checked without a model, before torch is imported."""
    for flag in ("num_samples", "batch_size", "limit", "max_new_tokens", "think_budget",
                 "tensor_parallel_size", "max_model_len", "t_max"):  # fmt: skip
        check_count("--" + flag.replace("_", "-"), getattr(args, flag))
    check_sampling(args.temperature, args.top_p, args.max_new_tokens)
    fraction = args.gpu_memory_utilization
    if fraction is not None and not 0 < fraction <= 1:
        raise TraacError(f"--gpu-memory-utilization {fraction}: must lie in (0, 1]")
    check_placement(args.device, args.device_map)
    check_model("--model", args.model)
    if args.scoring_model is not None:
        check_model("--scoring-model", args.scoring_model)
    check_input("--responses", args.responses)
    if args.model is not None and args.tokenizer is not None:
        raise TraacError(
            f"--tokenizer {args.tokenizer}: no effect with --model (lengths are counted in the "
            "model's own tokens); drop it"
        )
    if args.responses is not None:
        parser = build_parser()
        for name in _GENERATION:  # what only generating reads
            if getattr(args, name) != parser.get_default(name):
                raise TraacError(f"--{name.replace('_', '-')}: no effect with --responses "
                                 "(nothing is generated); drop it")  # fmt: skip
    words = args.responses is not None and args.tokenizer is None
    if words and args.t_max is not None:
        raise TraacError(
            f"--t-max {args.t_max}: t_max counts think tokens, but without --tokenizer the "
            "lengths are whitespace words; add --tokenizer NAME (or drop --t-max)"
        )
    if words and args.otb_scoring == "official":
        raise TraacError(
            "--otb-scoring official counts think tokens with the model's tokenizer; add "
            "--tokenizer NAME"
        )
    compression = settings_from(args, CompressionSettings)
    settings_from(args, FormatSettings)
    check_test_time_scorer(args.scoring_model, args.compress_tau, compression.scorer)
    budget = args.think_budget is not None
    check_compression_read(compression, args.compress_tau is not None, budget)
    if args.responses is not None and (args.device or args.device_map or args.dtype):
        raise TraacError(
            "--device, --device-map and --dtype apply to generation; --responses needs no model"
        )
    if args.device_map is not None and args.backend != "transformers":
        raise TraacError(
            "--device-map spreads a model on the transformers backend; vLLM splits one itself"
        )
    thinking = args.compress_tau is not None or args.think_budget is not None
    engine = vllm_settings(args)
    if args.batching == "refill" and (thinking or engine is not None):
        raise TraacError(
            "--batching refill: plain generation on the transformers backend only (test-time "
            "thinking drops finished rows itself; vLLM schedules its own batch); drop it"
        )
    if not args.dataset.strip():
        raise TraacError(
            "--dataset: empty; pass a file, testbed:TIER, reasoning-gym:TASK or a name"
        )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    from traac.common.models import (
        load_model,
        load_tokenizer,
        prompt_style_of,
        resolve_dtype,
        resolve_placement,
    )
    from traac.common.scoring_model import resolve_scoring_model
    from traac.compression.factory import check_probe_layers
    from traac.console import make_console, make_progress, print_blocks
    from traac.evaluation.harness.results import summary_blocks
    from traac.evaluation.harness.runner import EvalSettings, file_sha256, run_eval
    from traac.evaluation.inference.generation import Backend, VLLMSettings, make_backend

    compression = settings_from(args, CompressionSettings)
    think = settings_from(args, FormatSettings)
    thinking = args.compress_tau is not None or args.think_budget is not None
    given = vllm_settings(args)
    engine = None if given is None else VLLMSettings(**given)
    model = _model_key(args.model) if args.model else None
    scorer = resolve_scoring_model(args.scoring_model, policy_path=model, resolve=_model_key)
    scoring = scorer.path
    if args.compress_tau is not None and model:  # the probe's layers, before weights load
        check_probe_layers(compression, scoring or model)
    device, device_map = resolve_placement(args.device, args.device_map) if model else (None, None)
    dtype = resolve_dtype(args.dtype, device) if device is not None else None
    responses = args.responses.expanduser().resolve() if args.responses else None
    tokenizer = load_tokenizer(model or args.tokenizer) if (model or args.tokenizer) else None
    style = (
        args.prompt_style
        or (model and prompt_style_of(model))
        or (default_prompt_style(tokenizer, think.think_open) if tokenizer else "base")
    )
    settings = EvalSettings(
        dataset=_path_key(args.dataset),
        model=model,
        responses=str(responses) if responses else None,
        responses_sha256=file_sha256(responses) if responses else None,
        tokenizer=args.tokenizer,
        prompt_style=style,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        chat_format=think.chat_format,
        compress_tau=args.compress_tau,
        compression=asdict(compression) if thinking else None,
        scoring_model=scoring,
        think_budget=args.think_budget,
    )

    def backend(tok: Any) -> Backend:
        from traac.evaluation.inference.placement import probe_placement
        from traac.evaluation.inference.refill import RefillBackend
        from traac.evaluation.inference.testtime import ThinkingGenerator
        from traac.evaluation.inference.thinking_backend import ThinkingBackend
        from traac.evaluation.inference.vllm_thinking import load_vllm_engine
        from traac.pipelines.model_registry import resolve_model

        path = resolve_model(model)
        if not thinking and args.batching == "refill":
            return RefillBackend(load_model(path, device=device, dtype=dtype), tok, args.batch_size)
        if not thinking:
            return make_backend(
                args.backend,
                path,
                tok,
                device=args.device,
                dtype=args.dtype,
                seed=args.seed,
                device_map=device_map,
                vllm=engine,
            )
        fmt = think.resolve(tok)
        decoder, probe_device, vllm = None, device, engine
        if engine is not None:
            if args.compress_tau is not None:  # a transformers copy beside vLLM, placed first
                copy = resolve_model(scoring) if scoring else path
                placed = probe_placement(
                    copy, dtype, engine, args.gpu_memory_utilization is not None,
                    device, args.device is not None,
                )  # fmt: skip
                probe_device, vllm = placed.device, placed.engine
            decoder = load_vllm_engine(
                path, tok, fmt, seed=args.seed, settings=vllm, dtype=args.dtype
            )
        # The transformers model decodes, or (vLLM) runs compression's probe; a foreign
        # scoring model runs the probe instead.
        probing = decoder is None or (args.compress_tau is not None and scoring is None)
        placement: dict[str, Any] = {
            "device": probe_device, "dtype": dtype, "device_map": device_map,
        }  # fmt: skip
        generator = ThinkingGenerator(
            load_model(path, **placement) if probing else None,
            tok,
            fmt,
            compress_tau=args.compress_tau,
            think_budget=args.think_budget,
            settings=compression,
            engine=decoder,
            scoring_model=load_model(resolve_model(scoring), **placement) if scoring else None,
            scoring_tokenizer=scorer.tokenizer,
        )
        return ThinkingBackend(generator)

    console = make_console()
    result = run_eval(
        settings,
        args.output,
        num_samples=args.num_samples,
        limit=args.limit,
        batch_size=args.batch_size,
        args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        make_backend=backend if model else None,
        tokenizer=tokenizer,
        progress=make_progress(console),
        t_max=PAPER_T_MAX if args.t_max is None else args.t_max,
        otb_scoring=args.otb_scoring,
    )
    title = f"{result.summary.model} on {settings.dataset}"  # as in summary.md
    print_blocks(make_console(stderr=False), summary_blocks(result.summary, title))
    console.print(
        f"{len(result.records)} samples in {args.output / 'samples.jsonl'} "
        f"({result.new} new, {result.done_before} already there)",
        markup=False,
        highlight=False,
    )
    return 0


def vllm_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The vLLM engine settings given (None on the transformers backend, which takes none)."""
    given = {
        "tensor_parallel_size": args.tensor_parallel_size,
        "max_model_len": args.max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
    }
    given = {k: v for k, v in given.items() if v is not None}
    if args.backend != "vllm":
        if given:
            flag = "--" + next(iter(given)).replace("_", "-")
            raise TraacError(f"{flag} sets the vLLM engine: add --backend vllm or drop it")
        return None
    if args.responses is not None:
        raise TraacError("--backend vllm generates; --responses needs no model")
    return given


def _path_key(name: str) -> str:
    """How run.json names a model or dataset: an absolute path if local, else as given (so a
    rerun from another directory still matches)."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def _model_key(name: str) -> str:
    """A named or GGUF model is named by its cache directory, which changes with its
    configuration or file, so a rebuilt testbed or another GGUF file counts as another model."""
    from traac.common.gguf import is_gguf_path
    from traac.pipelines.model_registry import MODELS, resolve_model

    return resolve_model(name) if name in MODELS or is_gguf_path(name) else _path_key(name)
