"""``found-rl bench policy``: CPU inference frames/s of the default driving policy network.

The network is the default SAC actor (BEV 15×96×96 + state 10 → four 3×3 stride-2 convs,
1×1 conv, state MLP, fusion, 256-256 head), deterministic actions, random weights (speed does
not depend on them). Each variant runs side by side in one process at batch 1 and batch 64:
eager ``no_grad``, ``inference_mode`` + channels-last, and a traced + frozen TorchScript graph.
Targets: ≥ 1,000 FPS at batch 1 and ≥ 5,000 FPS at batch 64 (the paper reports about 500).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from typing import Any

from found_rl.cli.argtypes import finite_float, int_at_least

FPS_B1_TARGET = 1_000.0
FPS_B64_TARGET = 5_000.0


def _frames_per_second(model: Any, inputs: tuple[Any, ...], batch: int, min_seconds: float, warmup: int = 5) -> float:
    """Frames/s of ``model(*inputs)`` under ``inference_mode``, timed for at least ``min_seconds``."""
    import torch

    with torch.inference_mode():
        for _ in range(warmup):
            model(*inputs)
        calls, start = 0, time.perf_counter()
        while True:
            model(*inputs)
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds and calls >= 10:
                return calls * batch / elapsed


def _eager_frames_per_second(model: Any, bev: Any, state: Any, batch: int, min_seconds: float) -> float:
    """Frames/s of the plain eager call (the caller holds ``no_grad``)."""
    for _ in range(5):
        model(bev, state)
    calls, start = 0, time.perf_counter()
    while True:
        model(bev, state)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and calls >= 10:
            return calls * batch / elapsed


def measure(batch_sizes: tuple[int, ...] = (1, 64), min_seconds: float = 1.5) -> dict[str, dict[int, float]]:
    """Frames/s per variant and batch size for the default driving actor."""
    import numpy as np
    import torch

    from found_rl.models.observation import ObsSpec
    from found_rl.models.policy import PolicySpec, build_actor

    torch.manual_seed(0)
    spec = PolicySpec("sac", ObsSpec(bev_shape=(15, 96, 96), state_dim=10), action_dim=2)
    actor = build_actor(spec).eval()

    class DeterministicActor(torch.nn.Module):
        """(bev uint8, state) → tanh(mean): a tensor-only signature that TorchScript can trace."""

        def __init__(self, net: torch.nn.Module):
            super().__init__()
            self.net = net

        def forward(self, bev: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
            return self.net.act({"bev": bev, "state": state}, deterministic=True)

    wrapped = DeterministicActor(actor).eval()
    results: dict[str, dict[int, float]] = {
        "eager no_grad": {},
        "inference_mode + channels_last": {},
        "jit trace + freeze": {},
    }
    rng = np.random.default_rng(0)
    channels_last_model = DeterministicActor(copy.deepcopy(actor)).eval().to(memory_format=torch.channels_last)
    for batch in batch_sizes:
        bev = torch.as_tensor(rng.integers(0, 256, (batch, 15, 96, 96), dtype=np.uint8))
        state = torch.as_tensor(rng.normal(size=(batch, 10)).astype(np.float32))
        # Plain eager baseline: autograd off with no_grad, not inference_mode.
        with torch.no_grad():
            results["eager no_grad"][batch] = _eager_frames_per_second(wrapped, bev, state, batch, min_seconds)
        bev_channels_last = bev.contiguous(memory_format=torch.channels_last)
        results["inference_mode + channels_last"][batch] = _frames_per_second(
            channels_last_model, (bev_channels_last, state), batch, min_seconds
        )
        with torch.inference_mode():
            traced = torch.jit.freeze(torch.jit.trace(wrapped, (bev, state)).eval())
        results["jit trace + freeze"][batch] = _frames_per_second(traced, (bev, state), batch, min_seconds)
    return results


def run(args: argparse.Namespace) -> int:
    import os

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    results = measure(min_seconds=args.seconds)
    best = {batch: max(variant[batch] for variant in results.values()) for batch in (1, 64)}
    report = {
        "fps_b1": best[1],
        "fps_b64": best[64],
        "fps_b1_target": FPS_B1_TARGET,
        "fps_b64_target": FPS_B64_TARGET,
        "fps_b1_target_met": best[1] >= FPS_B1_TARGET,
        "fps_b64_target_met": best[64] >= FPS_B64_TARGET,
        "variants": {name: {f"b{batch}": fps for batch, fps in by_batch.items()} for name, by_batch in results.items()},
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.table import Table

    from found_rl.tables import print_table

    eager = results["eager no_grad"]
    table = Table(
        title=(
            f"default driving policy, CPU inference ({report['torch_threads']} torch threads, "
            f"load {report['load_average_1min']:.1f})"
        )
    )
    for column in ("variant", "FPS b1", "FPS b64", "b1 vs eager", "b64 vs eager"):
        table.add_column(column)
    for name, by_batch in results.items():
        table.add_row(
            name,
            f"{by_batch[1]:,.0f}",
            f"{by_batch[64]:,.0f}",
            f"{by_batch[1] / eager[1]:.2f}×",
            f"{by_batch[64] / eager[64]:.2f}×",
        )
    table.add_row(
        "target",
        f">= {FPS_B1_TARGET:,.0f} ({'met' if report['fps_b1_target_met'] else 'not met'})",
        f">= {FPS_B64_TARGET:,.0f} ({'met' if report['fps_b64_target_met'] else 'not met'})",
        "",
        "",
    )
    print_table(table)
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=int_at_least(0),
        default=0,
        help="torch CPU threads (default: torch's choice)",
    )
    parser.add_argument(
        "--seconds",
        type=finite_float(0, inclusive=False),
        default=1.5,
        help="minimum timing window per measurement (default 1.5)",
    )
    parser.set_defaults(run=run)
