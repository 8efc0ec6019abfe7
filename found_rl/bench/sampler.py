"""``found-rl bench sampler``: FAST against single-clip and lock-step baselines, side by side.

Every sampler runs the same policy on the same env, one env per worker process, until it has
collected the same number of valid transitions. Reported per sampler and clip count N:
wall-clock per 10k valid transitions, valid-sample fraction, share of time spent waiting for
env steps and resets, and speed-up over the single-clip sampler.

Envs: ``synthetic`` is :class:`fast_sampler.CarlaLikeEnv` (CARLA's reset/step latency ratio and
heavy-tailed episode lengths, latencies scaled down and sleep-based so they overlap across
workers even on a 2-core machine); ``sumo`` is found-rl's SUMO ``DrivingEnv``, whose reset loads
a new clip (network, traffic and route).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

from found_rl.argtypes import SEED, finite_float
from found_rl.errors import UserError

SAMPLERS = ("single", "per_clip_reset", "global_reset", "fast")
TARGET_SPEEDUP_AT_8 = 2.5
SUMO_SCENARIO = "scenarios/small_grid.yaml"


@dataclass(frozen=True)
class Measurement:
    """One sampler at one clip count."""

    sampler: str
    num_clips: int
    valid_transitions: int
    seconds: float
    valid_fraction: float
    env_time_share: float

    @property
    def seconds_per_10k(self) -> float:
        return self.seconds / self.valid_transitions * 10_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", choices=("synthetic", "sumo"), default="synthetic",
                        help="synthetic: CARLA-like timing, sleep-based (default); sumo: the SUMO DrivingEnv")
    parser.add_argument("--clips", type=int, nargs="+", default=None, metavar="N", help="clip counts (default 4 8 16)")
    parser.add_argument("--transitions", type=int, default=None,
                        help="valid transitions per measurement (default 4000 synthetic, 1000 sumo)")
    parser.add_argument("--step-ms", type=finite_float(0, inclusive=False), default=None,
                        help="synthetic env: mean step latency in ms (default 5; 1 with --quick)")
    parser.add_argument("--rho", type=float, default=0.5, help="FAST's ended-fraction threshold (default 0.5)")
    parser.add_argument("--seed", type=SEED, default=0)
    parser.add_argument("--adaptive", action="store_true",
                        help="also run FAST with an adaptive rho chosen by measured throughput (row fast_adaptive)")
    parser.add_argument("--quick", action="store_true", help="smoke test: N = 2 4, few transitions, 1 ms steps")
    parser.set_defaults(run=run)


def make_sumo_env() -> Any:
    """Module-level (picklable) factory for the SUMO env; importing found_rl registers its id."""
    import gymnasium

    import found_rl  # noqa: F401  (registers found_rl/Driving-v0)

    return gymnasium.make("found_rl/Driving-v0", scenario=SUMO_SCENARIO)


class MlpPolicy:
    """The one policy every sampler runs: a small torch MLP on the state vector."""

    def __init__(self, obs_dim: int, seed: int) -> None:
        import torch

        torch.manual_seed(seed)
        self._torch = torch
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_dim, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2), torch.nn.Tanh()
        )

    def __call__(self, obs: Any) -> Any:
        state = obs["state"] if isinstance(obs, dict) else obs
        with self._torch.no_grad():
            return self.net(self._torch.as_tensor(state, dtype=self._torch.float32)).numpy()


def measure(
    sampler_name: str, env_fns: list, policy: MlpPolicy, args: argparse.Namespace, transitions: int
) -> Measurement:
    """Run one sampler until it has ``transitions`` valid transitions; worker start-up is not timed."""
    from fast_sampler import FastSampler, GlobalResetSampler, PerClipResetSampler, ProcessExecutor, SingleClipSampler

    executor = ProcessExecutor(env_fns, timeout_s=300)
    if sampler_name == "fast":
        sampler = FastSampler(executor, policy, rho=args.rho, seed=args.seed)
    elif sampler_name == "fast_adaptive":
        sampler = FastSampler(executor, policy, adaptive_rho=True, seed=args.seed)
    elif sampler_name == "global_reset":
        sampler = GlobalResetSampler(executor, policy, seed=args.seed)
    elif sampler_name == "per_clip_reset":
        sampler = PerClipResetSampler(executor, policy, seed=args.seed)
    else:
        sampler = SingleClipSampler(executor, policy, seed=args.seed)
    with sampler:
        started_at = time.perf_counter()
        while sampler.stats.valid_transitions < transitions:
            sampler.step()
        seconds = time.perf_counter() - started_at
        stats = sampler.stats
    return Measurement(
        sampler_name, len(env_fns), stats.valid_transitions, seconds, stats.valid_fraction, stats.env_time_share
    )


def run(args: argparse.Namespace) -> int:
    import functools

    import torch
    from tqdm import tqdm

    from fast_sampler import CarlaLikeEnv
    from fast_sampler.rules import check_rho

    torch.set_num_threads(1)
    clip_counts = args.clips or ([2, 4] if args.quick else [4, 8, 16])
    if min(clip_counts) < 1:
        raise UserError(f"--clips: expected clip counts >= 1, got {clip_counts}")
    check_rho(args.rho)
    step_ms = args.step_ms if args.step_ms is not None else (1.0 if args.quick else 5.0)
    if not step_ms > 0:
        raise UserError(f"--step-ms: expected a positive latency, got {step_ms}")
    default_transitions = 300 if args.quick else (1000 if args.env == "sumo" else 4000)
    transitions = args.transitions if args.transitions is not None else default_transitions
    if transitions < 1:
        raise UserError(f"--transitions: expected an int >= 1, got {transitions}")

    if args.env == "synthetic":
        env_fn = functools.partial(CarlaLikeEnv, step_latency_s=step_ms / 1000.0)
        env_description = (
            f"synthetic CARLA-like env (fast_sampler.CarlaLikeEnv), NOT a simulator: sleep-based step "
            f"{step_ms:g} ms (log-normal jitter), reset 40-100 steps = {40 * step_ms:g}-{100 * step_ms:g} ms, "
            "episode length log-normal median 50 steps, sigma 1, cap 1000"
        )
        obs_dim = env_fn().observation_space.shape[0]
    else:
        env_fn = make_sumo_env
        env_description = f"SUMO DrivingEnv found_rl/Driving-v0, scenario {SUMO_SCENARIO} (reset loads a new clip)"
        probe = make_sumo_env()
        obs_dim = probe.observation_space["state"].shape[0]
        probe.close()
    policy = MlpPolicy(obs_dim, args.seed)

    names = [*SAMPLERS[1:], "fast_adaptive"] if args.adaptive else list(SAMPLERS[1:])
    cases = [("single", 1)] + [(name, num_clips) for num_clips in clip_counts for name in names]
    results: list[Measurement] = []
    # stderr, and only on a terminal: the table or JSON on stdout stays clean
    for name, num_clips in tqdm(cases, desc="bench sampler", unit="case", disable=None):
        results.append(measure(name, [env_fn] * num_clips, policy, args, transitions))
    report = build_report(results, args.env, env_description, transitions, clip_counts)
    print(json.dumps(report, indent=2) if args.json else format_table(report, results))
    return 0


def build_report(
    results: list[Measurement], env: str, description: str, transitions: int, clip_counts: list[int]
) -> dict[str, Any]:
    """The ``--json`` object; ``results[0]`` is the single-clip reference."""
    single = results[0]
    report: dict[str, Any] = {
        "env": env,
        "env_description": description,
        "valid_transitions_per_run": transitions,
        "clips": clip_counts,
        "single_clip": {"seconds_per_10k": single.seconds_per_10k, "env_time_share": single.env_time_share},
    }
    for key in ("seconds_per_10k", "speedup_vs_single", "valid_fraction", "env_time_share"):
        report[key] = {m.sampler: {} for m in results[1:]}
    for m in results[1:]:
        report["seconds_per_10k"][m.sampler][str(m.num_clips)] = round(m.seconds_per_10k, 3)
        report["speedup_vs_single"][m.sampler][str(m.num_clips)] = round(single.seconds_per_10k / m.seconds_per_10k, 3)
        report["valid_fraction"][m.sampler][str(m.num_clips)] = round(m.valid_fraction, 4)
        report["env_time_share"][m.sampler][str(m.num_clips)] = round(m.env_time_share, 4)
    fast_at_8 = report["speedup_vs_single"]["fast"].get("8")
    if fast_at_8 is not None:
        baselines = [report["speedup_vs_single"][name]["8"] for name in ("per_clip_reset", "global_reset")]
        report["target"] = {
            "fast_speedup_at_8": fast_at_8,
            "required": TARGET_SPEEDUP_AT_8,
            "met": bool(fast_at_8 >= TARGET_SPEEDUP_AT_8 and fast_at_8 > max(baselines)),
        }
    return report


def format_table(report: dict[str, Any], results: list[Measurement]) -> str:
    """The human-readable table; speed-ups are the report's, so table and JSON agree."""
    lines = [
        f"env: {report['env_description']}",
        f"each row: {report['valid_transitions_per_run']} valid transitions, one env per worker process",
        "",
        f"{'sampler':<16}{'N':>4}{'s / 10k valid':>15}{'valid frac':>12}{'env time':>10}{'speed-up':>10}",
    ]
    for m in results:
        speedup = 1.0 if m.sampler == "single" else report["speedup_vs_single"][m.sampler][str(m.num_clips)]
        lines.append(
            f"{m.sampler:<16}{m.num_clips:>4}{m.seconds_per_10k:>15.1f}{m.valid_fraction:>12.1%}"
            f"{m.env_time_share:>10.1%}{speedup:>9.2f}x"
        )
    if "target" in report:
        target = report["target"]
        verdict = "met" if target["met"] else "NOT met"
        lines += ["", f"target: FAST >= {target['required']}x over single clip at N=8 and ahead of both lock-step "
                      f"baselines: {verdict} ({target['fast_speedup_at_8']:.2f}x)"]
    return "\n".join(lines)
