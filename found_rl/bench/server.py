"""``found-rl bench server``: advisor-server throughput, batching gain, latency and reply integrity.

Starts ``python -m vlm_server`` on 127.0.0.1 twice (dynamic batching on, then
``max_batch_size=1``), each with a fixed-cost advisor (``base_ms + per_item_ms * batch``, a
sleep) and a tiny random open_clip scorer, and drives both with 1/16/64/256 closed-loop
clients. Every level is bounded by a request count and a duration. Then 20,000 requests at
256 clients check that no reply is lost, duplicated or mixed up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from found_rl.argtypes import finite_float, int_at_least
from found_rl.errors import UserError

TINY_CLIP_NAME = "found-rl-bench-tiny-clip"
TINY_CLIP_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {
        "image_size": 64,
        "layers": 2,
        "width": 64,
        "patch_size": 16,
        "head_width": 32,
    },
    "text_cfg": {
        "context_length": 32,
        "vocab_size": 49408,
        "width": 64,
        "heads": 2,
        "layers": 2,
    },
}
CLIP_IMAGE_PX = 64
BACKENDS = ("fixed-cost", "tiny-clip")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: few requests per level"
    )
    parser.add_argument(
        "--clients", default="1,16,64,256", help="comma-separated concurrency levels"
    )
    parser.add_argument(
        "--backends",
        default="fixed-cost,tiny-clip",
        help=f"subset of {','.join(BACKENDS)}",
    )
    parser.add_argument(
        "--requests", type=int_at_least(1), default=3000, help="request cap per level"
    )
    parser.add_argument(
        "--duration-s", type=finite_float(0, inclusive=False), default=5.0, help="time cap per level, seconds"
    )
    parser.add_argument(
        "--loss-requests",
        type=int_at_least(1),
        default=20_000,
        help="requests in the loss check (256 clients)",
    )
    parser.add_argument(
        "--base-ms",
        type=finite_float(0, inclusive=True),
        default=20.0,
        help="fixed-cost backend: ms per model call",
    )
    parser.add_argument(
        "--per-item-ms",
        type=finite_float(0, inclusive=True),
        default=0.1,
        help="fixed-cost backend: extra ms per item",
    )
    parser.add_argument(
        "--max-batch-size", type=int_at_least(1), default=64, help="batch cap with batching on"
    )
    parser.add_argument(
        "--max-wait-ms", type=finite_float(0, inclusive=True), default=5.0, help="flush timer with batching on"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    levels = _parse_levels(args.clients)
    args.backend_names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.backend_names or set(args.backend_names) - set(BACKENDS):
        raise UserError(
            f"--backends must be a subset of {','.join(BACKENDS)}, got {args.backends!r}"
        )
    if args.quick:
        args.requests, args.duration_s, args.loss_requests = (
            min(args.requests, 300),
            min(args.duration_s, 1.5),
            2000,
        )
    report = asyncio.run(_benchmark(args, levels))
    if args.json:
        print(json.dumps(report))
    else:
        _print_table(report)
    return 0


def _parse_levels(text: str) -> list[int]:
    """``--clients`` as ints >= 1; a typo names the flag instead of ``int()``'s message."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise UserError(f"--clients must list positive integers such as 1,16,64, got {text!r}")
    return levels


async def _benchmark(args: argparse.Namespace, levels: list[int]) -> dict[str, Any]:
    from vlm_server.backends.fixed_cost import expected_action
    from vlm_server.client import clip_payload
    from vlm_server.loadgen import run_load

    rows: list[dict[str, Any]] = []
    loss: dict[str, Any] = {}
    image = (
        __import__("numpy").arange(CLIP_IMAGE_PX * CLIP_IMAGE_PX * 3) % 251
    ).astype("uint8")
    clip_body = clip_payload(
        image.reshape(CLIP_IMAGE_PX, CLIP_IMAGE_PX, 3), 4, 3.0, (0.5, 0.0)
    )
    clip_json = json.dumps(clip_body)[1:-1]

    def advise_request(index: int):
        command, speed = 1 + index % 6, float(index % 97)
        expected = list(expected_action(command, speed))
        body = f'{{"id":"q{index}","command":{command},"speed_mps":{speed}}}'.encode()
        return (
            f"q{index}",
            body,
            lambda reply: reply.get("ok") is True and _close(reply["action"], expected),
        )

    def clip_request(index: int):
        body = f'{{"id":"q{index}",{clip_json}}}'.encode()
        return (
            f"q{index}",
            body,
            lambda reply: reply.get("ok") is True and -0.25 <= reply["bonus"] <= 0.25,
        )

    from tqdm import tqdm

    # One step per measured load: every backend x client level, batching on and off, and the loss test.
    loads = 2 * len(args.backend_names) * len(levels) + 1
    with tempfile.TemporaryDirectory() as tmp, tqdm(total=loads, desc="bench server", unit="load", disable=None) as bar:
        config_path = Path(tmp) / f"{TINY_CLIP_NAME}.json"
        config_path.write_text(json.dumps(TINY_CLIP_CONFIG))
        for batching in ("on", "off"):
            max_batch = args.max_batch_size if batching == "on" else 1
            with ServerProcess(_bench_server_args(args, max_batch, config_path)) as server:
                for backend, path, factory in (
                    ("fixed-cost", "/v1/advise", advise_request),
                    ("tiny-clip", "/v1/clip/score", clip_request),
                ):
                    if backend not in args.backend_names:
                        continue
                    name = "advisor" if backend == "fixed-cost" else "clip"
                    for clients in levels:
                        before = await asyncio.to_thread(server.batch_totals, name)
                        result = await run_load(
                            server.url + path,
                            factory,
                            clients=clients,
                            max_requests=args.requests,
                            max_duration_s=args.duration_s,
                        )
                        after = await asyncio.to_thread(server.batch_totals, name)
                        bar.update()
                        batches = after[1] - before[1]
                        rows.append(
                            {
                                "backend": backend,
                                "batching": batching,
                                "clients": clients,
                                "requests_per_s": result.requests_per_s,
                                "mean_batch_size": (after[0] - before[0]) / batches
                                if batches
                                else 0.0,
                                "p50_ms": result.latency_percentile(50),
                                "p95_ms": result.latency_percentile(95),
                                "p99_ms": result.latency_percentile(99),
                                "overhead_p50_ms": result.overhead_percentile(50),
                                "overhead_p99_ms": result.overhead_percentile(99),
                                "replies": len(result.latency_ms),
                                "lost": result.lost,
                                "duplicated": result.duplicated,
                                "mismatched": result.mismatched,
                            }
                        )
                if batching == "on":
                    result = await run_load(
                        server.url + "/v1/advise",
                        advise_request,
                        clients=256,
                        max_requests=args.loss_requests,
                        max_duration_s=600.0,
                    )
                    bar.update()
                    loss = {
                        "loss_requests": result.sent,
                        "lost": result.lost,
                        "duplicated": result.duplicated,
                        "mismatched": result.mismatched,
                        "loss_rejected_429": result.rejected_429,
                        "loss_requests_per_s": result.requests_per_s,
                    }
    return _summarise(rows, loss, args)


def _close(actual: list[float], expected: list[float]) -> bool:
    return all(abs(a - b) < 1e-9 for a, b in zip(actual, expected))


def _summarise(
    rows: list[dict[str, Any]], loss: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    def rate(backend: str, batching: str, clients: int) -> float:
        return next(
            (
                r["requests_per_s"]
                for r in rows
                if (r["backend"], r["batching"], r["clients"])
                == (backend, batching, clients)
            ),
            float("nan"),
        )

    on_fixed = [
        r for r in rows if r["backend"] == "fixed-cost" and r["batching"] == "on"
    ]
    overhead_by_clients = {str(r["clients"]): r["overhead_p99_ms"] for r in on_fixed}
    return {
        "batching_speedup_64": rate("fixed-cost", "on", 64)
        / rate("fixed-cost", "off", 64),
        "clip_batching_speedup_64": rate("tiny-clip", "on", 64)
        / rate("tiny-clip", "off", 64),
        "overhead_p99_ms": overhead_by_clients.get("1", float("nan")),
        "overhead_p99_ms_by_clients": overhead_by_clients,
        **loss,
        "settings": {
            "base_ms": args.base_ms,
            "per_item_ms": args.per_item_ms,
            "max_batch_size": args.max_batch_size,
            "max_wait_ms": args.max_wait_ms,
            "requests_per_level": args.requests,
            "duration_s_per_level": args.duration_s,
        },
        "levels": rows,
    }


def _print_table(report: dict[str, Any]) -> None:
    header = (
        f"{'backend':<11}{'batching':>9}{'clients':>8}{'req/s':>9}{'batch':>7}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'p99 ms':>9}{'ovh p99':>9}{'lost':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in report["levels"]:
        print(
            f"{r['backend']:<11}{r['batching']:>9}{r['clients']:>8}{r['requests_per_s']:>9.0f}"
            f"{r['mean_batch_size']:>7.1f}{r['p50_ms']:>9.1f}{r['p95_ms']:>9.1f}{r['p99_ms']:>9.1f}"
            f"{r['overhead_p99_ms']:>9.2f}{r['lost']:>6}"
        )
    print()
    print(
        f"batching speed-up at 64 clients: fixed-cost {report['batching_speedup_64']:.1f}x (target >= 8x), "
        f"tiny CLIP {report['clip_batching_speedup_64']:.1f}x"
    )
    print(
        f"server overhead p99 at 1 client: {report['overhead_p99_ms']:.2f} ms (target <= 5 ms); by clients: "
        + ", ".join(
            f"{k}: {v:.2f}" for k, v in report["overhead_p99_ms_by_clients"].items()
        )
    )
    print(
        f"integrity: {report.get('loss_requests', 0)} requests at 256 clients: lost {report.get('lost')}, "
        f"duplicated {report.get('duplicated')}, mismatched {report.get('mismatched')} "
        f"({report.get('loss_requests_per_s', 0):.0f} req/s, {report.get('loss_rejected_429', 0)} 429s retried)"
    )


def _bench_server_args(args: argparse.Namespace, max_batch_size: int, clip_config: Path) -> list[str]:
    """Server flags of this benchmark: the fixed-cost advisor, and the tiny CLIP scorer if asked."""
    server_args = [
        "--advisor",
        "fixed-cost",
        "--advisor-option",
        f"base_ms={args.base_ms}",
        "--advisor-option",
        f"per_item_ms={args.per_item_ms}",
        "--max-batch-size",
        str(max_batch_size),
        "--max-wait-ms",
        str(args.max_wait_ms),
        "--max-queue-size",
        "8192",
    ]
    if "tiny-clip" in args.backend_names:
        server_args += [
            "--clip",
            "openclip",
            "--clip-option",
            f"model_name={TINY_CLIP_NAME}",
            "--clip-option",
            "pretrained=null",
            "--clip-option",
            f"model_config_path={clip_config}",
            "--clip-option",
            f"image_size={CLIP_IMAGE_PX}",
        ]
    return server_args


class ServerProcess:
    """``python -m vlm_server SERVER_ARGS`` on a free loopback port, stopped (SIGINT, drained) on exit."""

    def __init__(self, server_args: list[str], ready_timeout_s: float = 180.0) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready_timeout_s = ready_timeout_s
        self.command = [
            sys.executable,
            "-m",
            "vlm_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "WARNING",
            *server_args,
        ]
        self.process: subprocess.Popen | None = None
        self._log: Any = None

    def __enter__(self) -> ServerProcess:
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        # stderr goes to a file: an unread pipe would block a chatty server
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.command, env=env, stdout=subprocess.DEVNULL, stderr=self._log
        )
        try:
            self._wait_ready(timeout_s=self.ready_timeout_s)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if self.process.returncode == 2:  # the server's usage error: a flag passed through is bad
                    raise UserError(f"the advisor server refused these settings: {self._server_log()}")
                raise RuntimeError(f"benchmark server exited: {self._server_log()}")
            if self._get("/readyz")[0] == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"benchmark server not ready after {timeout_s:.0f} s")

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # graceful drain
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def _server_log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def batch_totals(self, backend: str) -> tuple[float, float]:
        """(items, batches) so far, from the server's Prometheus batch-size histogram."""
        text = self._get("/metrics")[1]
        totals = []
        for suffix in ("sum", "count"):
            match = re.search(
                rf'vlm_server_batch_size_{suffix}{{backend="{backend}"}} (\S+)', text
            )
            totals.append(float(match.group(1)) if match else 0.0)
        return totals[0], totals[1]

    def _get(self, path: str) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as response:
                return response.status, response.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            return getattr(exc, "code", 0) or 0, ""
