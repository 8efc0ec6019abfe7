"""``found-rl bench policy``: CPU cost of a driving policy network preset.

For ``--preset NAME`` (``roach``: the Roach/Found-RL encoder; ``cpu``: the laptop preset), with
random weights (speed does not depend on them): FLOPs and parameters of the actor, inference
frames/s at batch 1 and 64 (each variant side by side in one process: eager ``no_grad``,
``inference_mode`` + channels-last, and a traced + frozen TorchScript graph), and SAC gradient
updates/s at batch 128 with the whole input path (sampling uint8 BEV batches from a replay
buffer, converting, both critics, the delayed actor and the temperature). Each preset reads the
BEV it is built for: ``roach`` 15 × 96 × 96, ``cpu`` 15 × 48 × 48 (``PRESET_BEV_POOL``).
Targets: roach ≥ 1,000 FPS at batch 1 and ≥ 5,000 at batch 64 (the paper reports about 500);
cpu ≥ 2,000 / ≥ 10,000 FPS and ≥ 10 SAC updates/s at batch 128 on 2 cores (issue 10).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable
from typing import Any

from found_rl.argtypes import finite_float, int_at_least

TARGETS: dict[str, dict[str, float]] = {
    "roach": {"fps_b1": 1_000.0, "fps_b64": 5_000.0},
    "cpu": {"fps_b1": 2_000.0, "fps_b64": 10_000.0, "sac_updates_per_s": 10.0, "sac_updates_per_s_b64": 30.0},
}
SAC_BATCH = 128
QUICKSTART_BATCH = 64


def state_dim() -> int:
    """The env's state length (imported on use: the simulator's kernels load with it)."""
    from found_rl.state_vector import STATE_SIZE

    return STATE_SIZE


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


def bev_shape(preset: str) -> tuple[int, int, int]:
    """The BEV the preset reads: 15 channels, 192 px max-pooled by its ``PRESET_BEV_POOL``."""
    from found_rl.models.encoders import PRESET_BEV_POOL

    side = 192 // PRESET_BEV_POOL[preset]
    return (15, side, side)


def actor_cost(preset: str) -> tuple[int, int]:
    """``(FLOPs per frame, parameters)`` of the SAC actor of a preset (a MAC counts 2 FLOPs)."""
    import torch

    actor = _actor(preset)
    macs = 0

    def count(module: torch.nn.Module, inputs: Any, output: torch.Tensor) -> None:
        nonlocal macs
        if isinstance(module, torch.nn.Conv2d):
            per_output = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            macs += output.numel() * per_output
        elif isinstance(module, torch.nn.Linear):
            macs += output.numel() // output.shape[-1] * module.in_features * module.out_features

    layers = [m for m in actor.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    hooks = [layer.register_forward_hook(count) for layer in layers]
    with torch.no_grad():
        bev = torch.zeros((1, *bev_shape(preset)), dtype=torch.uint8)
        actor.act({"bev": bev, "state": torch.zeros(1, state_dim())})
    for hook in hooks:
        hook.remove()
    return 2 * macs, sum(p.numel() for p in actor.parameters())


def _actor(preset: str) -> Any:
    from found_rl.models.encoders import network_preset
    from found_rl.models.observation import ObsSpec
    from found_rl.models.policy import PolicySpec, build_actor

    spec = PolicySpec("sac", ObsSpec(bev_shape=bev_shape(preset), state_dim=state_dim()), 2, network_preset(preset))
    return build_actor(spec).eval()


def sac_updates_per_second(
    preset: str, min_seconds: float, batch_size: int = SAC_BATCH, target_features: str | None = None
) -> float:
    """SAC updates/s at ``batch_size``, sampling uint8 BEV batches from a filled replay buffer.

    ``target_features`` defaults to the one ``found-rl train`` uses (``learner.target_features``).
    """
    import numpy as np
    import torch

    from found_rl.algos.sac import SAC, SacConfig
    from found_rl.guidance_settings import Awag, Vmr
    from found_rl.models.encoders import network_preset
    from found_rl.models.observation import ObsSpec
    from found_rl.storage.replay import ReplayBuffer
    from found_rl.train.config import LearnerConfig

    spec = ObsSpec(bev_shape=bev_shape(preset), state_dim=state_dim())
    config = SacConfig(batch_size=batch_size, network=network_preset(preset), vmr=Vmr(enabled=True),
                       awag=Awag(enabled=True), target_features=target_features or LearnerConfig().target_features)
    sac = SAC(spec, 2, config)
    rng = np.random.default_rng(0)
    clips = 4
    replay = ReplayBuffer(2_048, spec, 2, num_envs=clips)
    obs = {"bev": rng.integers(0, 2, (clips, *spec.bev_shape), dtype=np.uint8) * 255,
           "state": rng.normal(size=(clips, state_dim())).astype(np.float32)}
    no = np.zeros(clips, bool)
    for step in range(400):
        next_obs = {"bev": np.roll(obs["bev"], 1, axis=-1), "state": obs["state"] + 0.1}
        ids = [(clip, 0, step) for clip in range(clips)]
        replay.add(obs, rng.uniform(-1, 1, (clips, 2)), rng.normal(size=clips), next_obs, no, no, step_ids=ids)
        for step_id in ids:
            replay.attach_labels(step_id, action=rng.uniform(-1, 1, 2))
        obs = next_obs
    torch.manual_seed(0)
    for _ in range(3):
        sac.update(replay.sample(batch_size, rng), 1_000)
    updates, start = 0, time.perf_counter()
    while True:
        sac.update(replay.sample(batch_size, rng), 1_000)
        updates += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and updates >= 5:
            return updates / elapsed


def measure(
    batch_sizes: tuple[int, ...] = (1, 64),
    min_seconds: float = 1.5,
    preset: str = "roach",
    progress: Callable[[], Any] | None = None,
) -> dict[str, dict[int, float]]:
    """Frames/s per variant and batch size for the preset's SAC actor (``progress()`` after each)."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    actor = _actor(preset)
    shape = bev_shape(preset)

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
        bev = torch.as_tensor(rng.integers(0, 256, (batch, *shape), dtype=np.uint8))
        state = torch.as_tensor(rng.normal(size=(batch, state_dim())).astype(np.float32))
        # Plain eager baseline: autograd off with no_grad, not inference_mode.
        done = progress or (lambda: None)
        with torch.no_grad():
            results["eager no_grad"][batch] = _eager_frames_per_second(wrapped, bev, state, batch, min_seconds)
        done()
        bev_channels_last = bev.contiguous(memory_format=torch.channels_last)
        results["inference_mode + channels_last"][batch] = _frames_per_second(
            channels_last_model, (bev_channels_last, state), batch, min_seconds
        )
        done()
        with torch.inference_mode():
            traced = torch.jit.freeze(torch.jit.trace(wrapped, (bev, state)).eval())
        results["jit trace + freeze"][batch] = _frames_per_second(traced, (bev, state), batch, min_seconds)
        done()
    return results


def run(args: argparse.Namespace) -> int:
    import os

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    preset = args.preset
    # 3 inference variants x 2 batch sizes, then the SAC updates (3 settings).
    with tqdm(total=9, desc="bench policy", unit="measurement", disable=None) as bar:
        results = measure(min_seconds=args.seconds, preset=preset, progress=bar.update)
        updates = sac_updates_per_second(preset, args.seconds)
        bar.update()
        updates_b64 = sac_updates_per_second(preset, args.seconds, QUICKSTART_BATCH)
        bar.update()
        # the update before issue 26's DrQ-v2 target form, measured beside it
        updates_b64_target_encoder = sac_updates_per_second(preset, args.seconds, QUICKSTART_BATCH, "target_encoder")
        bar.update()
    best = {batch: max(variant[batch] for variant in results.values()) for batch in (1, 64)}
    flops, parameters = actor_cost(preset)
    targets = TARGETS[preset]
    measured = {"fps_b1": best[1], "fps_b64": best[64], "sac_updates_per_s": updates,
                "sac_updates_per_s_b64": updates_b64}
    report = {
        "preset": preset,
        "bev_shape": list(bev_shape(preset)),
        **measured,
        "flops_per_frame": flops,
        "parameters": parameters,
        "sac_batch_size": SAC_BATCH,
        "sac_updates_per_s_b64_target_encoder": updates_b64_target_encoder,
        "online_encoder_speedup_b64": updates_b64 / max(updates_b64_target_encoder, 1e-9),
        "targets": targets,
        "targets_met": {key: measured[key] >= target for key, target in targets.items()},
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
            f"policy preset {preset!r} on a {'×'.join(map(str, bev_shape(preset)))} BEV: {flops / 1e6:.2f} "
            f"MFLOP/frame, {parameters:,} actor parameters; CPU "
            f"inference ({report['torch_threads']} torch threads, load {report['load_average_1min']:.1f})"
        )
    )
    for column in ("variant", "FPS b1", "FPS b64", "b1 vs eager", "b64 vs eager"):
        table.add_column(column)
    for name, by_batch in results.items():
        table.add_row(
            name, f"{by_batch[1]:,.0f}", f"{by_batch[64]:,.0f}",
            f"{by_batch[1] / eager[1]:.2f}×", f"{by_batch[64] / eager[64]:.2f}×",
        )

    def verdict(key: str) -> str:
        if key not in targets:
            return "no target"
        return f">= {targets[key]:,.0f} ({'met' if report['targets_met'][key] else 'not met'})"

    table.add_row("target", verdict("fps_b1"), verdict("fps_b64"), "", "")
    print_table(table)
    verdict_text = verdict("sac_updates_per_s")
    print(f"SAC updates/s at batch {SAC_BATCH} (replay sampling included): {updates:.1f}  target {verdict_text}")
    print(f"SAC updates/s at batch {QUICKSTART_BATCH} (the quickstart's): {updates_b64:.1f}  target "
          f"{verdict('sac_updates_per_s_b64')}; with the target encoder (a third encoder pass): "
          f"{updates_b64_target_encoder:.1f} ({report['online_encoder_speedup_b64']:.2f}× for DrQ-v2's target form)")
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=tuple(TARGETS), default="roach", help="network preset")
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
