"""``found-rl bench vlm``: VLM advisor fine-tuning throughput and served requests/s at batch 1 and 32.

Fine-tuning: ``found-rl vlm finetune``'s own loop (LoRA and full) on a synthetic expert dataset
of 192 px BEVs; tokens/s and samples/s exclude the first step (allocation, lazy init).
Serving: ``python -m vlm_server --advisor hf`` on the model, started twice (``max_batch_size``
1, then 32), each driven by the same number of closed-loop clients sending 192 px BEVs; the
ratio of the two is the batching gain. Without ``--model`` the model is the tiny random LLaVA
of ``found_rl.vlm.tiny`` (pipeline cost, not a real VLM's); its answers never parse, so every
reply is a well-formed "unparseable answer" and the decoder always runs ``--max-new-tokens``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from found_rl.cli.argtypes import finite_float, int_at_least
from found_rl.errors import UserError

BATCH_SIZES = (1, 32)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smoke test: few steps and requests")
    parser.add_argument("--model", type=Path, help="local image-text-to-text checkpoint (default: the tiny LLaVA)")
    parser.add_argument("--device", default="cpu", help="torch device for fine-tuning and serving")
    parser.add_argument("--methods", default="lora,full", help="fine-tuning methods to time (lora, full)")
    parser.add_argument("--steps", type=int_at_least(2), default=20, help="fine-tuning steps per method")
    parser.add_argument("--batch-size", type=int_at_least(1), default=8, help="fine-tuning batch size")
    parser.add_argument("--clients", type=int_at_least(1), default=32, help="concurrent clients when serving")
    parser.add_argument("--requests", type=int_at_least(1), default=2000, help="request cap per serving level")
    parser.add_argument(
        "--duration-s", type=finite_float(0, inclusive=False), default=15.0, help="time cap per serving level"
    )
    parser.add_argument("--max-new-tokens", type=int_at_least(1), default=32, help="decoding budget per answer")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or set(methods) - {"lora", "full"}:
        raise UserError(f"--methods must be a subset of lora,full, got {args.methods!r}")
    if args.model is not None and not (args.model / "config.json").is_file():
        raise UserError(f"--model {args.model}: not a Hugging Face checkpoint folder (no config.json)")
    if args.quick:
        args.steps, args.requests, args.duration_s = min(args.steps, 4), min(args.requests, 64), min(args.duration_s, 5)
    from found_rl.vlm.hf_logging import quiet_transformers

    quiet_transformers()
    with tempfile.TemporaryDirectory() as tmp:
        report = _benchmark(args, methods, Path(tmp))
    print(json.dumps(report) if args.json else _table(report))
    return 0


def _benchmark(args: argparse.Namespace, methods: list[str], tmp: Path) -> dict[str, Any]:
    from found_rl.vlm.tiny import build_tiny_vlm, write_tiny_dataset

    model = args.model.resolve() if args.model else build_tiny_vlm(tmp / "tiny-model")
    data = write_tiny_dataset(tmp / "data", episodes=8, steps=max(8, args.batch_size), seed=0)
    finetune_rows = [_finetune_row(method, model, data, tmp / f"run-{method}", args) for method in methods]
    serve_rows = [asyncio.run(_serve_row(batch, model, args)) for batch in BATCH_SIZES]
    rate = {row["max_batch_size"]: row["requests_per_s"] for row in serve_rows}
    return {
        "model": str(args.model) if args.model else "tiny random LLaVA (found_rl.vlm.tiny)",
        "device": args.device,
        "finetune": finetune_rows,
        "serve": serve_rows,
        "serve_batching_speedup": rate[32] / rate[1] if rate.get(1) else float("nan"),
    }


def _finetune_row(method: str, model: Path, data: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    from found_rl.vlm.config import FinetuneConfig
    from found_rl.vlm.finetune import Finetuner

    config = FinetuneConfig(
        data=str(data), model=str(model), out=str(out), method=method, steps=args.steps,
        batch_size=args.batch_size, eval_fraction=0.0, eval_every=0, save_every=args.steps, log_every=args.steps,
        device=args.device,
    )
    summary = Finetuner(config, show_progress=False).run()
    return {
        "method": method,
        "steps": summary["steps"],
        "batch_size": args.batch_size,
        "tokens_per_s": summary["tokens_per_s"],
        "samples_per_s": summary["samples_per_s"],
        "trainable_parameters": summary["trainable_parameters"],
        "precision": summary["precision"],
    }


async def _serve_row(max_batch_size: int, model: Path, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from found_rl.bench.server import ServerProcess
    from vlm_server.client import advise_payload
    from vlm_server.loadgen import run_load

    rng = np.random.default_rng(0)
    bodies = []
    for index in range(16):
        cells = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
        image = np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1)  # 192 x 192
        payload = advise_payload(image, 1 + index % 4, float(index % 9), {"target_ego_xy": [6.0, 0.5]})
        bodies.append(json.dumps(payload)[1:-1])

    def request(index: int):
        item_id = f"q{index}"
        body = f'{{"id":"{item_id}",{bodies[index % len(bodies)]}}}'.encode()
        return item_id, body, lambda reply: "timing_ms" in reply  # parsed or not, the model answered

    server_args = [
        "--advisor", "hf",
        "--advisor-option", f"model_path={model}",
        "--advisor-option", f"device={args.device}",
        "--advisor-option", f"max_new_tokens={args.max_new_tokens}",
        "--max-batch-size", str(max_batch_size),
        "--max-wait-ms", "5",
    ]  # fmt: skip
    with ServerProcess(server_args, ready_timeout_s=600.0) as server:
        await run_load(server.url + "/v1/advise", request, clients=args.clients, max_requests=2, max_duration_s=60)
        items_before, batches_before = await asyncio.to_thread(server.batch_totals, "advisor")
        result = await run_load(
            server.url + "/v1/advise",
            request,
            clients=args.clients,
            max_requests=args.requests,
            max_duration_s=args.duration_s,
            request_timeout_s=120.0,
        )
        items, batches = await asyncio.to_thread(server.batch_totals, "advisor")
        items, batches = items - items_before, batches - batches_before
    return {
        "max_batch_size": max_batch_size,
        "clients": args.clients,
        "requests_per_s": result.requests_per_s,
        "replies": len(result.latency_ms),
        "mean_batch_size": items / batches if batches else 0.0,
        "p50_ms": result.latency_percentile(50),
        "p95_ms": result.latency_percentile(95),
        "lost": result.lost,
    }


def _table(report: dict[str, Any]) -> str:
    lines = [f"model: {report['model']} on {report['device']}", ""]
    header = f"{'fine-tuning':<12}{'steps':>6}{'batch':>6}{'tokens/s':>10}{'samples/s':>11}{'trainable':>11}"
    lines += [header, "-" * len(header)]
    for row in report["finetune"]:
        lines.append(
            f"{row['method']:<12}{row['steps']:>6}{row['batch_size']:>6}{row['tokens_per_s']:>10.0f}"
            f"{row['samples_per_s']:>11.1f}{row['trainable_parameters']:>11}"
        )
    header = f"{'serving':<12}{'clients':>8}{'req/s':>9}{'batch':>7}{'p50 ms':>9}{'p95 ms':>9}{'lost':>6}"
    lines += ["", header, "-" * len(header)]
    for row in report["serve"]:
        lines.append(
            f"{'batch ' + str(row['max_batch_size']):<12}{row['clients']:>8}{row['requests_per_s']:>9.1f}"
            f"{row['mean_batch_size']:>7.1f}{row['p50_ms']:>9.0f}{row['p95_ms']:>9.0f}{row['lost']:>6}"
        )
    lines += ["", f"served requests/s, max batch 32 vs 1: {report['serve_batching_speedup']:.2f}x"]
    return "\n".join(lines)
