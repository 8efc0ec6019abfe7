"""``found-rl vlm``: build an untrained VLM advisor (``init``), fine-tune it on expert data, score it (``evaluate``).

Examples::

    found-rl expert collect --scenario scenarios/town_grid.yaml --steps 50000 --perturb-chance 0.05 --out data/expert
    found-rl vlm init --preset small --out models/advisor-small
    found-rl vlm finetune --data data/expert --model models/advisor-small --out runs/vlm-cpu --max-minutes 30
    found-rl vlm finetune --data data/expert --model ckpt/InternVL3-1B-hf --out runs/vlm --full --steps 3000
    found-rl vlm evaluate --data data/expert --model runs/vlm/model --json
    found-rl serve --advisor hf --advisor-option model_path=runs/vlm/model --advisor-option device=cuda
    found-rl eval --scenario scenarios/town_grid.yaml --agent advisor:http://127.0.0.1:8470 --out results/vlm.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from found_rl.argtypes import SEED, finite_float, int_at_least
from found_rl.cli.paths import check_output_dir
from found_rl.errors import MissingPathError, UserError
from found_rl.vlm.hf_logging import quiet_transformers

DEFAULT_EVAL_FRACTION = 0.1
DEFAULT_SPLIT_SEED = 0


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="vlm_command", metavar="ACTION", required=True)
    _configure_init(actions.add_parser("init", help="write an untrained advisor VLM sized for CPU training"))
    _configure_finetune(actions.add_parser("finetune", help="supervised fine-tuning on expert chat samples"))
    _configure_evaluate(actions.add_parser("evaluate", help="score a VLM advisor against the expert"))


def _configure_init(parser: argparse.ArgumentParser) -> None:
    from found_rl.vlm.scratch import PRESETS

    parser.add_argument(
        "--preset", choices=tuple(PRESETS), default="small",
        help="model size: tiny (tests, seconds) or small (the 30-minute CPU run; default)",
    )
    parser.add_argument("--out", required=True, type=Path, help="model folder to write (new or empty)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the random weights")
    sizes = parser.add_argument_group("resizing the preset (default: the preset's own)")
    sizes.add_argument(
        "--image-px", type=int_at_least(8), help="side the BEV is resized to for the vision tower (small: 64)"
    )
    sizes.add_argument(
        "--patch-px", type=int_at_least(2), help="vision patch side; (image/patch)^2 image tokens (small: 16)"
    )
    sizes.add_argument(
        "--hidden", type=int_at_least(32), help="width of both towers, 32 per attention head (small: 128)"
    )
    sizes.add_argument("--layers", type=int_at_least(1), help="transformer layers of each tower (small: 2)")
    parser.set_defaults(run=run_init)


def _configure_finetune(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", required=True, type=Path, action="append",
        help="expert dataset folder (expert collect --out); repeat it to train on several as one set (DAgger rounds)",
    )
    parser.add_argument("--model", required=True, type=Path, help="local image-text-to-text checkpoint folder")
    parser.add_argument("--out", required=True, type=Path, help="run folder (new, or an earlier run with --resume)")
    method = parser.add_mutually_exclusive_group()
    method.add_argument(
        "--lora", dest="method", action="store_const", const="lora",
        help="LoRA adapters (default for a pretrained checkpoint)",
    )
    method.add_argument(
        "--full", dest="method", action="store_const", const="full",
        help="train every weight (default for a `vlm init` model)",
    )
    parser.set_defaults(method=None)
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--steps", type=int_at_least(1), help="optimiser steps (default: from --epochs)")
    parser.add_argument(
        "--max-minutes", type=finite_float(0, inclusive=False),
        help="stop after this much training time with a final checkpoint and model; the learning-rate "
        "schedule then ends at the limit (a resumed run counts the time already trained)",
    )
    parser.add_argument("--epochs", type=finite_float(0, inclusive=False), default=1.0)
    parser.add_argument("--batch-size", type=int_at_least(1), default=4, help="samples per micro-batch")
    parser.add_argument("--grad-accum", type=int_at_least(1), default=1, help="micro-batches per optimiser step")
    parser.add_argument(
        "--learning-rate", type=finite_float(0, inclusive=False),
        help="peak rate (default 2e-4 LoRA, 1e-5 full; a `vlm init` model's own, e.g. 2e-3)",
    )
    parser.add_argument("--weight-decay", type=finite_float(0, inclusive=True), default=0.0)
    parser.add_argument("--warmup-fraction", type=finite_float(0, inclusive=True, maximum=0.99), default=0.03)
    parser.add_argument("--max-grad-norm", type=finite_float(0, inclusive=True), default=1.0, help="0 disables")
    parser.add_argument("--lora-rank", type=int_at_least(1), default=16)
    parser.add_argument("--lora-alpha", type=finite_float(0, inclusive=False), default=32.0)
    parser.add_argument("--lora-dropout", type=finite_float(0, inclusive=True, maximum=0.99), default=0.05)
    parser.add_argument(
        "--lora-targets",
        default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
        help="comma-separated leaf names of language-model linear layers",
    )
    parser.add_argument("--freeze-vision", action="store_true", help="with --full: keep the vision tower as it is")
    parser.add_argument(
        "--aux-action-weight", type=finite_float(0, inclusive=True), default=0.0,
        help="with --full: add W x an auxiliary action-classification loss on the image tokens, which "
        "trains the vision tower directly (0: off; the head stays in the checkpoint, not in model/)",
    )
    parser.add_argument(
        "--vision-warmup-steps", type=int_at_least(0), default=0,
        help="with --aux-action-weight: the first N steps train the auxiliary loss alone (the decoder waits)",
    )
    _add_split_flags(parser, defaults=True)
    parser.add_argument("--eval-every", type=int_at_least(0), default=200, help="held-out loss every N steps (0: off)")
    parser.add_argument("--eval-samples", type=int_at_least(1), default=64, help="held-out samples per loss check")
    parser.add_argument("--save-every", type=int_at_least(1), default=200, help="checkpoint every N steps")
    parser.add_argument("--log-every", type=int_at_least(1), default=10, help="TensorBoard interval, steps")
    parser.add_argument("--seed", type=SEED, default=0)
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="less activation memory, more compute")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow the checkpoint's own model code")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=run_finetune)


def _configure_evaluate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", required=True, type=Path, action="append", help="expert dataset folder; repeat it for several"
    )
    parser.add_argument("--model", required=True, type=Path, help="model folder (e.g. a finetune run's model/)")
    parser.add_argument(
        "--split", choices=("eval", "train", "all", "other-towns"), default="eval",
        help="which samples to score: eval (held-out episodes; default), train, all, or other-towns (all "
        "samples of a dataset of other towns; warns if a road network was in the training data)",
    )
    _add_split_flags(parser, defaults=False)
    parser.add_argument("--limit", type=int_at_least(1), help="score at most this many samples (the first ones)")
    parser.add_argument("--batch-size", type=int_at_least(1), default=16, help="samples per generate call")
    parser.add_argument("--max-new-tokens", type=int_at_least(1), default=32)
    parser.add_argument("--device", default="cpu", help="torch device")
    parser.add_argument("--dtype", choices=("auto", "float16", "bfloat16", "float32"), default="auto")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=run_evaluate)


def _add_split_flags(parser: argparse.ArgumentParser, defaults: bool) -> None:
    note = "" if defaults else " (default: as the model was trained, else "
    parser.add_argument(
        "--eval-fraction",
        type=finite_float(0, inclusive=True, maximum=0.99),
        default=DEFAULT_EVAL_FRACTION if defaults else None,
        help="share of episodes held out" + (note + f"{DEFAULT_EVAL_FRACTION})" if note else ""),
    )
    parser.add_argument(
        "--split-seed",
        type=SEED,
        default=DEFAULT_SPLIT_SEED if defaults else None,
        help="seed of the episode split" + (note + f"{DEFAULT_SPLIT_SEED})" if note else ""),
    )


def run_init(args: argparse.Namespace) -> int:
    from found_rl.vlm.scratch import ArchitectureChanges, init_advisor

    check_output_dir(args.out, "--out")
    if args.out.is_dir() and any(args.out.iterdir()):
        raise UserError(f"--out {args.out}: folder is not empty; give a new or empty folder for the model")
    quiet_transformers()
    changes = ArchitectureChanges(args.image_px, args.patch_px, args.hidden, args.layers)
    card = init_advisor(args.out, args.preset, args.seed, changes)
    shape = card["architecture"]
    print(
        f"wrote an untrained {args.preset} advisor VLM to {args.out}: {card['parameters'] / 1e6:.2f} M parameters, "
        f"BEV resized to {shape['image_px']} px ({card['image_tokens']} image tokens), "
        f"{shape['text_layers']}x{shape['text_hidden']} decoder"
    )
    print(
        f"train it: found-rl vlm finetune --data DATA --model {args.out} --out RUN --epochs 10 --batch-size 32 "
        f"--max-minutes 30 (full training at learning rate {card['finetune']['learning_rate']:g} by default)"
    )
    return 0


def _method_and_rate(args: argparse.Namespace) -> tuple[str, float | None]:
    """``--lora``/``--full`` and ``--learning-rate``, defaulting to what a `vlm init` model's card asks for."""
    from found_rl.vlm.scratch import untrained_card

    card = untrained_card(args.model)
    if card is None:
        return args.method or "lora", args.learning_rate
    suggested = card.get("finetune", {})
    method = args.method or suggested.get("method", "full")
    rate = args.learning_rate if args.learning_rate is not None else suggested.get("learning_rate")
    return method, rate if method == "full" else args.learning_rate


def run_finetune(args: argparse.Namespace) -> int:
    from found_rl.vlm.config import FinetuneConfig
    from found_rl.vlm.finetune import Finetuner
    from found_rl.vlm.lora import LoraSettings

    check_output_dir(args.out, "--out")
    _check_data(args.data)
    if not args.model.is_dir():
        raise MissingPathError(f"--model {args.model}: no such folder (a local checkpoint folder is needed)")
    method, learning_rate = _method_and_rate(args)
    targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    config = FinetuneConfig(
        data=tuple(str(folder.resolve()) for folder in args.data),
        model=str(args.model.resolve()),
        out=str(args.out),
        method=method,
        steps=args.steps,
        max_minutes=args.max_minutes,
        epochs=args.epochs,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        learning_rate=learning_rate,
        weight_decay=args.weight_decay,
        warmup_fraction=args.warmup_fraction,
        max_grad_norm=args.max_grad_norm,
        lora=LoraSettings(rank=args.lora_rank, alpha=args.lora_alpha, dropout=args.lora_dropout, targets=targets),
        freeze_vision=args.freeze_vision,
        eval_fraction=args.eval_fraction,
        split_seed=args.split_seed,
        eval_every=args.eval_every,
        eval_samples=args.eval_samples,
        save_every=args.save_every,
        log_every=args.log_every,
        seed=args.seed,
        device=args.device,
        precision=args.precision,
        gradient_checkpointing=args.gradient_checkpointing,
        trust_remote_code=args.trust_remote_code,
        aux_action_weight=args.aux_action_weight,
        vision_warmup_steps=args.vision_warmup_steps,
    )
    quiet_transformers()
    finetuner = Finetuner(config, resume=args.resume, show_progress=not args.no_progress)
    if finetuner.step >= finetuner.total_steps:
        print(f"{args.out}: already trained {finetuner.step} of {finetuner.total_steps} steps; exporting the model")
    summary = finetuner.run()
    answer_loss, eval_loss = summary.get("answer_loss"), summary.get("eval_answer_loss")
    aux_accuracy = summary.get("eval_aux_action_accuracy")
    if summary["stopped_by"] == "max_minutes":
        limit, steps = args.max_minutes, summary["steps"]
        print(f"stopped at --max-minutes {limit:g} after {steps} of {finetuner.total_steps} steps")
    print(
        f"trained {summary['steps']} steps on {summary['train_samples']} samples "
        f"({len(summary['train_episodes'])} episodes; {summary['eval_samples']} held out): answer loss "
        + (f"{answer_loss:.4f}" if answer_loss is not None else "not trained yet (vision warm-up)")
        + (f", held-out {eval_loss:.4f}" if eval_loss is not None else "")
        + (f", held-out action-head accuracy {aux_accuracy:.3f}" if aux_accuracy is not None else "")
        + f"; {summary['tokens_per_s']:.0f} tokens/s, {summary['samples_per_s']:.1f} samples/s on {summary['device']}"
    )
    model_dir = args.out / "model"
    print(f"model: {model_dir}\nserve it: found-rl serve --advisor hf --advisor-option model_path={model_dir}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from found_rl.dataset.town_overlap import overlap_warning
    from found_rl.vlm.evaluate import evaluate
    from found_rl.vlm.examples import load_datasets, select_split
    from found_rl.vlm.training_data import training_data

    _check_data(args.data)
    if not args.model.is_dir():
        raise MissingPathError(f"--model {args.model}: no such folder")
    card = _advisor_card(args.model)
    eval_fraction, split_seed = _split_settings(args, card)
    all_examples = load_datasets(args.data)
    examples = select_split(all_examples, args.split, eval_fraction, split_seed)
    if not examples:
        raise UserError(
            f"--split {args.split}: --data {' '.join(map(str, args.data))} has no samples in those episodes "
            f"(--eval-fraction {eval_fraction:g}); use --split all to score every sample"
        )
    if args.limit is not None:
        examples = examples[: args.limit]
    training = training_data(card, args.data, all_examples, eval_fraction, split_seed)
    quiet_transformers()
    report = evaluate(
        examples,
        str(args.model),
        training,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        max_new_tokens=args.max_new_tokens,
        trust_remote_code=args.trust_remote_code,
        show_progress=not args.no_progress,
    )
    report["split"] = {"name": args.split, "eval_fraction": eval_fraction, "split_seed": split_seed}
    overlap = report["towns_overlap_training"]
    if args.split == "other-towns" and overlap:
        print(overlap_warning(overlap), file=sys.stderr)
    elif args.split == "other-towns" and overlap is None:
        print(
            f"note: cannot check that --data {' '.join(map(str, args.data))} is held out by town: the road networks of "
            + ("--data" if not any(e.network for e in examples) else "the model's training data")
            + " are not recorded, or not under the same network identity (collect it again)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(_nan_to_null(report), allow_nan=False))
    else:
        _print_table(report)
    return 0


def _check_data(folders: list[Path]) -> None:
    """Every ``--data`` folder exists, and none is given twice (its samples would count double)."""
    for folder in folders:
        if not folder.is_dir():
            raise MissingPathError(f"--data {folder}: no such folder")
    resolved = [folder.resolve() for folder in folders]
    for index, folder in enumerate(resolved):
        if folder in resolved[:index]:
            raise UserError(f"--data {folders[index]}: given twice; name each dataset once")


def _advisor_card(model: Path) -> dict:
    """The model's ``found_rl_advisor.json`` ({} when it has none)."""
    from vlm_server.backends.hf_checks import ADVISOR_CARD

    card_path = model / ADVISOR_CARD
    return json.loads(card_path.read_text()) if card_path.is_file() else {}


def _split_settings(args: argparse.Namespace, card: dict) -> tuple[float, int]:
    """Flags first, then the split the model was trained with (its advisor card), then the defaults."""
    from found_rl.vlm.training_data import trained_on_folders

    trained_on = trained_on_folders(card)
    is_episode_split = args.split in ("train", "eval")
    if is_episode_split and trained_on and (
            [Path(folder).resolve() for folder in trained_on] != [folder.resolve() for folder in args.data]):
        print(
            f"note: {args.model} was trained on {' '.join(trained_on)}; the {args.split} split of --data "
            f"{' '.join(map(str, args.data))} uses the same fraction and seed but other episodes",
            file=sys.stderr,
        )
    eval_fraction = args.eval_fraction if args.eval_fraction is not None else card.get("eval_fraction")
    split_seed = args.split_seed if args.split_seed is not None else card.get("split_seed")
    return (
        float(DEFAULT_EVAL_FRACTION if eval_fraction is None else eval_fraction),
        int(DEFAULT_SPLIT_SEED if split_seed is None else split_seed),
    )


def _nan_to_null(value):
    """Strict JSON: an MAE over no parsed answer is null, not ``NaN`` (which jq and browsers reject)."""
    if isinstance(value, dict):
        return {key: _nan_to_null(item) for key, item in value.items()}
    if isinstance(value, float) and value != value:
        return None
    return value


TABLE_COLUMNS = (("class agreement", "class_agreement", "{:>8.1%}"), ("MAE steer", "mae_steer", "{:>8.3f}"),
                 ("MAE acc", "mae_acc", "{:>8.3f}"))
"""The metrics shown for the model and each baseline, side by side (title, key, cell format)."""


def _print_table(report: dict) -> None:
    answerers = ("model", *report["baselines"])
    width = 8 * len(answerers)
    header = f"{'':<16}{'':>8}{'':>8}" + "".join(f"  {title:^{width}}" for title, _, _ in TABLE_COLUMNS)
    names = "".join(f"{_short(name):>8}" for name in answerers)
    subheader = f"{'':<16}{'samples':>8}{'parsed':>8}" + f"  {names}" * len(TABLE_COLUMNS)
    print(header)
    print(subheader)
    sections = [("command", report["per_command"])]
    if "per_town" in report:
        sections.append(("town", report["per_town"]))
    for title, rows in sections:
        print(f"{'per ' + title:<16}" + "-" * (len(subheader) - 16))
        for name, row in rows.items():
            print(_table_row(name, row, answerers))
    print("-" * len(subheader))
    print(_table_row("all", report, answerers))
    split = report["split"]
    if split["name"] in ("train", "eval"):
        print(f"split: {split['name']} episodes (fraction {split['eval_fraction']:g}, seed {split['split_seed']})")
    else:
        print(f"split: {split['name']} (every sample of --data)")
    print(
        "baselines, never shown the image: major. = always the most frequent class (its median action); "
        "prompt = the same per command, speed bin and target bearing; fitted on " + report["baselines_fitted_on"]
    )
    overlap = report["towns_overlap_training"]
    if overlap is not None:
        towns = ", ".join(sorted({entry["town"] for entry in overlap})) or "none"
        print(f"road networks also in the training data: {towns}")


def _short(name: str) -> str:
    return {"majority": "major.", "prompt_only": "prompt"}.get(name, name)


def _table_row(name: str, row: dict, answerers: tuple[str, ...]) -> str:
    cells = f"{name:<16}{row['samples']:>8}{row['parse_rate']:>8.1%}"
    for _, key, cell in TABLE_COLUMNS:
        values = [row[key], *(row["baselines"][b][key] for b in answerers[1:])]
        cells += "  " + "".join(cell.format(value) for value in values)
    return cells
