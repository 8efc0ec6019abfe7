"""``found-rl bench vlm``: VLM advisor fine-tuning throughput and served answers/s at batch 1, 4 and 32.

Fine-tuning: ``found-rl vlm finetune``'s own loop (LoRA and full) on a synthetic expert dataset
of 192 px BEVs; tokens/s and samples/s exclude the first step (allocation, lazy init).
Serving: ``python -m vlm_server --advisor hf`` on the model, started once per ``max_batch_size``
(``--batch-sizes``, default 1, 4, 32), each driven by the same number of closed-loop clients sending 192 px BEVs, every
request with its own speed and route target (as in training, where no two prompts repeat, so
the server's prompt cache does not flatter it). The levels run twice: with the server alone,
then beside a real training run (``found-rl train`` of ``--training-scenario``, 4 clips, advisor
none, stopped by its PID after the measurement), which is what the advisor competes with for
the cores when a run spawns it. The server's CPU use (cores, from ``/proc``) is reported per level.
Without ``--model`` the model is the LLaVA ``found-rl vlm init --preset tiny`` builds (the
advisor tokenizer, random weights; pipeline cost, not a real VLM's), saved without its
"untrained" advisor card so that LoRA may be timed on it too: with
``--max-new-tokens`` of at least its 11 answer tokens the server decodes it through the answer
template (every reply parses), with fewer by plain ``generate`` (replies are well-formed
"unparseable answer"s of ``--max-new-tokens`` tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from found_rl.argtypes import finite_float, int_at_least
from found_rl.errors import UserError

BATCH_SIZES = (1, 4, 32)
DEFAULT_PRESET = "tiny"
"""The ``vlm init`` preset measured without ``--model``."""
TRAINING_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "small_grid.yaml"
LOADS = ("train", "none")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smoke test: few steps and requests")
    parser.add_argument(
        "--model", type=Path, help="local image-text-to-text checkpoint (default: a random vlm init --preset tiny)"
    )
    parser.add_argument("--device", default="cpu", help="torch device for fine-tuning and serving")
    parser.add_argument(
        "--methods", default="lora,full", help="fine-tuning methods to time (lora, full; none: serving only)"
    )
    parser.add_argument("--steps", type=int_at_least(2), default=20, help="fine-tuning steps per method")
    parser.add_argument("--batch-size", type=int_at_least(1), default=8, help="fine-tuning batch size")
    parser.add_argument(
        "--batch-sizes", type=batch_sizes, default=BATCH_SIZES, metavar="N,N,...",
        help="the served max_batch_size levels, one server start each (default 1,4,32); the speedup "
             "compares the largest with the smallest",
    )
    parser.add_argument("--clients", type=int_at_least(1), default=32, help="concurrent clients when serving")
    parser.add_argument("--requests", type=int_at_least(1), default=2000, help="request cap per serving level")
    parser.add_argument(
        "--duration-s", type=finite_float(0, inclusive=False), default=15.0, help="time cap per serving level"
    )
    parser.add_argument("--max-new-tokens", type=int_at_least(1), default=32, help="decoding budget per answer")
    parser.add_argument(
        "--torch-threads", type=int_at_least(1), default=1,
        help="the server's torch threads (--advisor-option torch_threads; 1 suits 2 cores shared with training)",
    )
    parser.add_argument(
        "--beside", choices=LOADS, default="train",
        help="train: also measure beside a running training loop (default); none: the server alone only",
    )
    parser.add_argument("--training-scenario", type=Path, default=TRAINING_SCENARIO, help="scenario of that run")
    parser.add_argument(
        "--advisor-option", action="append", default=[], metavar="KEY=VALUE",
        help="extra option of the served hf backend, e.g. templated_decoding=false (repeatable)",
    )
    parser.set_defaults(run=run)


def batch_sizes(text: str) -> tuple[int, ...]:
    """``--batch-sizes``: distinct ints >= 1, comma-separated, in the order given."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"expected distinct ints >= 1 separated by commas, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if methods == ["none"]:
        methods = []
    elif not methods or set(methods) - {"lora", "full"}:
        raise UserError(f"--methods must be a subset of lora,full (or none), got {args.methods!r}")
    if args.beside == "train" and not args.training_scenario.is_file():
        raise UserError(f"--training-scenario {args.training_scenario}: no such file")
    for pair in args.advisor_option:
        if "=" not in pair:
            raise UserError(f"--advisor-option {pair!r}: expected KEY=VALUE")
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
    from found_rl.dataset.synthetic import write_synthetic_dataset

    model = args.model.resolve() if args.model else default_model(tmp / "model")
    finetune_rows = []
    if methods:  # the serving rows need no data
        data = write_synthetic_dataset(tmp / "data", episodes=8, steps=max(8, args.batch_size), seed=0)
        finetune_rows = [_finetune_row(method, model, data, tmp / f"run-{method}", args) for method in methods]
    serve_rows = [asyncio.run(_serve_row(batch, model, args)) for batch in args.batch_sizes]
    if args.beside == "train":
        with TrainingLoad(args.training_scenario, tmp / "training"):
            serve_rows += [{**asyncio.run(_serve_row(batch, model, args)), "beside_training": True}
                           for batch in args.batch_sizes]
    report = {
        "model": str(args.model) if args.model else f"random vlm init --preset {DEFAULT_PRESET}",
        "device": args.device,
        "torch_threads": args.torch_threads,
        "batch_sizes": list(args.batch_sizes),
        "advisor_options": list(args.advisor_option),
        "finetune": finetune_rows,
        "serve": serve_rows,
    }
    for row in serve_rows:
        suffix = "_beside_training" if row.get("beside_training") else ""
        report[f"answers_per_s_b{row['max_batch_size']}{suffix}"] = row["requests_per_s"]
        report[f"load_average_b{row['max_batch_size']}{suffix}"] = row["load_average"]
    rate = {row["max_batch_size"]: row["requests_per_s"] for row in serve_rows if not row.get("beside_training")}
    low, high = min(args.batch_sizes), max(args.batch_sizes)
    report["serve_batching_speedup"] = rate[high] / rate[low] if high > low and rate[low] else float("nan")
    return report


def default_model(directory: Path) -> Path:
    """Save the random LLaVA of ``vlm init --preset`` :data:`DEFAULT_PRESET` to ``directory`` (no advisor card)."""
    from found_rl.vlm.advisor_tokenizer import CHAT_TEMPLATE, advisor_tokenizer
    from found_rl.vlm.scratch import PRESETS, build_llava

    build_llava(directory, advisor_tokenizer(), PRESETS[DEFAULT_PRESET], CHAT_TEMPLATE)
    return directory


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
    from found_rl.train.resources import process_cpu_seconds
    from vlm_server.client import advise_payload
    from vlm_server.loadgen import run_load

    rng = np.random.default_rng(0)
    images = []
    for _ in range(16):
        cells = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
        image = np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1)  # 192 x 192
        images.append(json.dumps({"image": advise_payload(image, 4, 0.0)["image"]})[1:-1])

    def request(index: int):
        item_id = f"q{index}"
        speed, x, y = index % 150 / 10, 2 + index % 797 / 100, index % 401 / 100 - 2  # no two prompts alike
        fields = f'"command":{1 + index % 4},"speed_mps":{speed},"state":{{"target_ego_xy":[{x},{y}]}}'
        body = f'{{"id":"{item_id}",{fields},{images[index % len(images)]}}}'.encode()
        return item_id, body, lambda reply: "timing_ms" in reply  # parsed or not, the model answered

    server_args = [
        "--advisor", "hf",
        "--advisor-option", f"model_path={model}",
        "--advisor-option", f"device={args.device}",
        "--advisor-option", f"max_new_tokens={args.max_new_tokens}",
        "--advisor-option", f"torch_threads={args.torch_threads}",
        *[arg for pair in args.advisor_option for arg in ("--advisor-option", pair)],
        "--max-batch-size", str(max_batch_size),
        "--max-wait-ms", "5",
    ]  # fmt: skip
    with ServerProcess(server_args, ready_timeout_s=600.0) as server:
        await run_load(server.url + "/v1/advise", request, clients=args.clients, max_requests=2, max_duration_s=60)
        items_before, batches_before = await asyncio.to_thread(server.batch_totals, "advisor")
        cpu_before, start = process_cpu_seconds(server.process.pid), time.monotonic()
        result = await run_load(
            server.url + "/v1/advise",
            request,
            clients=args.clients,
            max_requests=args.requests,
            max_duration_s=args.duration_s,
            request_timeout_s=120.0,
        )
        cpu_after, elapsed = process_cpu_seconds(server.process.pid), time.monotonic() - start
        items, batches = await asyncio.to_thread(server.batch_totals, "advisor")
        items, batches = items - items_before, batches - batches_before
    cpu = (cpu_after - cpu_before) / elapsed if cpu_before is not None and cpu_after is not None else None
    return {
        "max_batch_size": max_batch_size,
        "clients": args.clients,
        "requests_per_s": result.requests_per_s,
        "replies": len(result.latency_ms),
        "mean_batch_size": items / batches if batches else 0.0,
        "p50_ms": result.latency_percentile(50),
        "p95_ms": result.latency_percentile(95),
        "lost": result.lost,
        "server_cpu_cores": cpu,
        "load_average": load_average(),
        "beside_training": False,
    }


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    from found_rl.bench.load import load_average as averages

    values = averages()
    return values[0] if values else None


class TrainingLoad:
    """A real ``found-rl train`` (4 clips, advisor none, one torch thread) running while the block runs.

    It stands for the training loop a spawned advisor shares its cores with. ``__enter__`` waits
    until the run has written its first scalars (the loop is stepping, past SUMO's warm-up);
    ``__exit__`` stops it by its PID (SIGINT, then SIGKILL to its own process group). Its wall
    budget is a safety net: it ends by itself if the benchmark dies.
    """

    def __init__(self, scenario: Path, folder: Path, ready_timeout_s: float = 300.0) -> None:
        self.scenario, self.folder, self.ready_timeout_s = scenario, folder, ready_timeout_s
        self.process: subprocess.Popen | None = None

    def config(self) -> dict[str, Any]:
        return {
            "scenario": str(self.scenario.resolve()),
            "torch_threads": 1,
            "budget": {"env_steps": 100_000_000, "wall_time_s": 3600},
            "sampler": {"clips": 4},
            "learner": {"learning_starts": 200, "batch_size": 64, "replay_capacity": 20_000},
            "evaluation": {"enabled": False},
            "checkpoint": {"every_env_steps": 100_000_000, "save_replay": False},
        }

    def __enter__(self) -> TrainingLoad:
        import yaml

        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "run.yaml"
        config.write_text(yaml.safe_dump(self.config()))
        command = [sys.executable, "-m", "found_rl", "train", str(config), "--run-dir", str(self.folder / "run"),
                   "--no-progress"]
        self._log = (self.folder / "train.log").open("wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_stepping()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_stepping(self) -> None:
        """Until the run's TensorBoard file holds more than its header: the loop has logged a step."""
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = (self.folder / "train.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"the background training run exited: {tail}")
            if any(p.stat().st_size > 1000 for p in (self.folder / "run").glob("events.out.tfevents.*")):
                return
            time.sleep(1.0)
        raise RuntimeError(f"the background training run logged nothing in {self.ready_timeout_s:.0f} s")

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: the run and its env workers
                self.process.wait()
        self._log.close()


def _table(report: dict[str, Any]) -> str:
    lines = [f"model: {report['model']} on {report['device']}, server torch threads {report['torch_threads']}"
             + (f", {' '.join(report['advisor_options'])}" if report["advisor_options"] else ""), ""]
    if report["finetune"]:
        header = f"{'fine-tuning':<12}{'steps':>6}{'batch':>6}{'tokens/s':>10}{'samples/s':>11}{'trainable':>11}"
        lines += [header, "-" * len(header)]
        for row in report["finetune"]:
            lines.append(
                f"{row['method']:<12}{row['steps']:>6}{row['batch_size']:>6}{row['tokens_per_s']:>10.0f}"
                f"{row['samples_per_s']:>11.1f}{row['trainable_parameters']:>11}"
            )
        lines.append("")
    header = (f"{'serving':<10}{'beside':>8}{'clients':>8}{'ans/s':>8}{'vs alone':>9}{'batch':>7}{'p50 ms':>8}"
              f"{'p95 ms':>8}{'cores':>7}{'load':>6}{'lost':>6}")
    lines += [header, "-" * len(header)]
    alone = {row["max_batch_size"]: row["requests_per_s"] for row in report["serve"] if not row["beside_training"]}
    for row in report["serve"]:
        base = alone.get(row["max_batch_size"])
        ratio = f"{row['requests_per_s'] / base:.2f}x" if base else "-"
        cores = f"{row['server_cpu_cores']:.2f}" if row["server_cpu_cores"] is not None else "-"
        load = f"{row['load_average']:.1f}" if row["load_average"] is not None else "-"
        lines.append(
            f"{'batch ' + str(row['max_batch_size']):<10}{'train' if row['beside_training'] else 'alone':>8}"
            f"{row['clients']:>8}{row['requests_per_s']:>8.1f}{ratio:>9}{row['mean_batch_size']:>7.1f}"
            f"{row['p50_ms']:>8.0f}{row['p95_ms']:>8.0f}{cores:>7}{load:>6}{row['lost']:>6}"
        )
    sizes = report["batch_sizes"]
    if len(sizes) > 1:
        lines += ["", f"served answers/s alone, max batch {max(sizes)} vs {min(sizes)}: "
                      f"{report['serve_batching_speedup']:.2f}x"]
    return "\n".join(lines)
