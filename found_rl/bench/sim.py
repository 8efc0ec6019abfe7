"""``found-rl bench sim``: how fast the SUMO ``DrivingEnv`` steps and resets on one core.

Measured in one process pinned to one core (OpenCV single-threaded):

- env-steps/s with full BEV observations at 0, 50 and 150 background vehicles (the scenario's
  traffic overridden), and with state-only observations at 50 vehicles;
- where each BEV step's time goes: backend (SUMO + ego dynamics), BEV rendering, and the rest
  (route tracking, infractions, hazards, state vector, reward);
- reset time (mean and p95, ms) per configuration, and the peak resident memory (MB);
- MetaDrive's top-down observation side by side, when ``metadrive`` is importable.

A simple route-following controller drives (pure pursuit on the route, 6 m/s): episodes end
as they would in training (route completed, red light, timeout) and are reset; steps/s counts
time inside ``env.step`` only (``CPU ms/step``: the thread's CPU time there, which on a shared
machine leaves out waiting for a core), resets are timed separately. Target (issue 2): >= 1000
steps/s with BEV and 50 vehicles, reset <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.cli.argtypes import finite_float

TARGET_STEPS_PER_S = 1000.0
TARGET_RESET_MS = 50.0
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario YAML (default: quickstart)")
    parser.add_argument("--steps", type=int, default=3000, help="env steps per measurement (default 3000)")
    parser.add_argument("--resets", type=int, default=30, help="extra timed resets (default 30)")
    parser.add_argument(
        "--vehicles", default="0,50,150", help="comma-separated background vehicle counts for the BEV runs"
    )
    parser.add_argument("--state-vehicles", type=int, default=50, help="vehicles in the state-only run (default 50)")
    parser.add_argument(
        "--warmup-s",
        type=finite_float(0, inclusive=True, maximum=3600),  # the scenario schema's traffic.warmup_s range
        default=None,
        help="override the scenario's traffic warm-up (seconds, 0-3600)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure every configuration this many times, round-robin, and report the median run "
        "(a shared machine's speed drifts within seconds; default 1)",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    parser.set_defaults(run=run)


@dataclass
class Timer:
    """Wall-clock seconds and calls accumulated around one callable."""

    seconds: float = 0.0
    calls: int = 0


class _Timed:
    """Wraps an object so calls of one method are timed (the rest passes through)."""

    def __init__(self, inner: Any, method: str, timer: Timer) -> None:
        self._inner, self._method, self._timer = inner, method, timer

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name != self._method:
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._timer.seconds += time.perf_counter() - start
                self._timer.calls += 1

        return timed


def follow_route(env: Any) -> Any:
    """A pure-pursuit action towards the route point 6 m ahead, cruising at 6 m/s."""
    import numpy as np

    snapshot = env.unwrapped.snapshot
    route, ego = snapshot.route, snapshot.ego
    target = route.xy[min(env.unwrapped.progress.index + 6, len(route.xy) - 1)]
    heading = math.atan2(target[1] - ego.xy[1], target[0] - ego.xy[0])
    error = (heading - math.radians(ego.yaw_deg) + math.pi) % (2 * math.pi) - math.pi
    acc = 0.5 if ego.speed_mps < 6.0 else -0.1
    return np.array([acc, max(-1.0, min(1.0, 2.0 * error))], dtype=np.float32)


def measure_env(env: Any, steps: int, seed: int) -> dict[str, Any]:
    """Step ``env`` ``steps`` times with :func:`follow_route`; time steps, resets and parts."""
    backend_timer, render_timer = Timer(), Timer()
    inner = env.unwrapped
    inner.backend = _Timed(inner.backend, "step", backend_timer)
    inner.renderer = _Timed(inner.renderer, "render", render_timer)
    reset_ms: list[float] = []
    reset_cpu_ms: list[float] = []
    _timed_reset(env, reset_ms, reset_cpu_ms, seed=seed)
    step_s, step_cpu_s, episodes = 0.0, 0.0, 0
    for _ in range(steps):
        action = follow_route(env)
        # CPU time of this thread as well: on a shared machine it excludes the time spent
        # waiting for a core, so it is the closer estimate of a quiet core.
        cpu_start = time.thread_time()
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        step_s += time.perf_counter() - start
        step_cpu_s += time.thread_time() - cpu_start
        if terminated or truncated:
            episodes += 1
            _timed_reset(env, reset_ms, reset_cpu_ms)
    backend_ms = 1000 * backend_timer.seconds / max(backend_timer.calls, 1)
    render_ms = 1000 * render_timer.seconds / max(render_timer.calls, 1)
    step_ms = 1000 * step_s / steps
    return {
        "steps_per_s": steps / step_s,
        "step_ms": step_ms,
        "step_cpu_ms": 1000 * step_cpu_s / steps,
        "backend_ms": backend_ms,
        "render_ms": render_ms,
        "other_ms": step_ms - backend_ms - render_ms,
        "episodes": episodes,
        "reset_ms": reset_ms,
        "reset_cpu_ms": reset_cpu_ms,
    }


def _timed_reset(env: Any, wall_ms: list[float], cpu_ms: list[float], **kwargs: Any) -> None:
    """``env.reset(**kwargs)``, appending its wall-clock and CPU milliseconds."""
    cpu_start = time.thread_time()
    start = time.perf_counter()
    env.reset(**kwargs)
    wall_ms.append(1000 * (time.perf_counter() - start))
    cpu_ms.append(1000 * (time.thread_time() - cpu_start))


def measure_metadrive(steps: int) -> dict[str, Any]:
    """MetaDrive's top-down observation env-steps/s, or why it was skipped."""
    try:
        from metadrive.envs.top_down_env import TopDownMetaDrive
    except ImportError:
        return {"skipped": "metadrive is not installed (pip install metadrive-simulator to compare)"}
    # An optional comparison must not sink the benchmark: any MetaDrive failure becomes a note.
    try:
        env = TopDownMetaDrive({"num_scenarios": 10, "start_seed": 0, "traffic_density": 0.1})
        try:
            env.reset(seed=0)
            start = time.perf_counter()
            for _ in range(steps):
                _, _, terminated, truncated, _ = env.step([0.0, 0.5])  # MetaDrive: (steer, throttle)
                if terminated or truncated:
                    env.reset()
            return {"steps_per_s": steps / (time.perf_counter() - start)}
        finally:
            env.close()
    except Exception as exc:
        return {"skipped": f"metadrive failed: {type(exc).__name__}: {exc}"}


def _reset_stats(wall_ms: list[float], cpu_ms: list[float]) -> dict[str, Any]:
    """Mean, p95 and CPU mean of timed resets; None (JSON null, not NaN) when none was timed."""
    import numpy as np

    timed = bool(wall_ms)
    return {
        "reset_ms": float(np.mean(wall_ms)) if timed else None,
        "reset_ms_p95": float(np.percentile(wall_ms, 95)) if timed else None,
        "reset_cpu_ms": float(np.mean(cpu_ms)) if timed else None,
        "resets_timed": len(wall_ms),
    }


def numpy_call_us() -> float:
    """Median wall time of one trivial numpy call, microseconds: how slow this machine is now.

    About 0.5 us on a quiet modern core; most of a step is calls of this kind, so the ratio to
    that scales the step times to a quiet core roughly.
    """
    import numpy as np

    a, b, out = np.ones(4), np.ones(4), np.empty(4)
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        for _ in range(50):
            np.add(a, b, out=out)
        samples.append((time.perf_counter() - start) / 50)
    return 1e6 * float(np.median(samples))


def _pin_to_one_core() -> str:
    """Pin this process to one CPU it may use; return a description."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def run(args: argparse.Namespace) -> int:
    import cv2
    from tqdm import tqdm

    from found_rl.env import DrivingEnv
    from found_rl.scenario import load_scenario

    counts = _parse_counts(args.vehicles)
    if args.steps < 1 or args.resets < 0 or args.state_vehicles < 0 or args.repeat < 1:
        raise ValueError(
            f"--steps must be >= 1, --resets >= 0, --state-vehicles >= 0 and --repeat >= 1, got --steps "
            f"{args.steps} --resets {args.resets} --state-vehicles {args.state_vehicles} --repeat {args.repeat}"
        )
    cv2.setNumThreads(1)
    core = "not pinned (--no-pin)" if args.no_pin else _pin_to_one_core()
    if args.scenario == DEFAULT_SCENARIO and not DEFAULT_SCENARIO.is_file():
        raise FileNotFoundError(
            f"the default scenario {DEFAULT_SCENARIO} ships with the found-rl source tree, not with an "
            "installed wheel; pass --scenario FILE (e.g. scenarios/quickstart.yaml of a clone)"
        )
    scenario = load_scenario(args.scenario)

    def scenario_with(vehicles: int) -> Any:
        traffic = {"vehicles": (vehicles, vehicles)}
        if args.warmup_s is not None:
            traffic["warmup_s"] = args.warmup_s
        return scenario.model_copy(update={"traffic": scenario.traffic.model_copy(update=traffic)})

    report: dict[str, Any] = {
        "scenario": str(args.scenario),
        "steps": args.steps,
        "walkers": list(scenario.traffic.walkers),
        "core": core,
        "numpy_call_us": numpy_call_us(),
    }
    runs = [("bev", n) for n in counts] + [("state", args.state_vehicles)]
    reset_key = f"bev_{counts[len(counts) // 2]}"  # the headline reset: BEV at the middle count
    results: dict[str, list[dict[str, Any]]] = {}
    resets: dict[str, tuple[list[float], list[float]]] = {}
    # stderr, and only on a terminal: the table or JSON on stdout stays clean
    bar = tqdm(total=args.repeat * len(runs), desc="bench sim", unit="run", disable=None)
    for round_index in range(args.repeat):
        for observation, vehicles in runs:
            key = f"{observation}_{vehicles}"
            bar.set_postfix_str(f"{key}, round {round_index + 1}/{args.repeat}")
            env = DrivingEnv(scenario_with(vehicles), observation=observation)
            try:
                result = measure_env(env, args.steps, scenario.seed)
                wall_ms, cpu_ms = resets.setdefault(key, ([], []))
                if key == reset_key and round_index == 0:
                    for k in range(args.resets):
                        _timed_reset(env, wall_ms, cpu_ms, seed=scenario.seed + 1 + k)
            finally:
                env.close()
            results.setdefault(key, []).append(result)
            wall_ms.extend(result["reset_ms"][1:])  # the first reset also starts SUMO; reported apart
            cpu_ms.extend(result["reset_cpu_ms"][1:])
            bar.update(1)
    bar.close()
    for key, repeats in results.items():
        # The median run by speed, whole (its breakdown adds up to its own step time).
        result = sorted(repeats, key=lambda r: r["steps_per_s"])[len(repeats) // 2]
        report[f"steps_per_s_{key}"] = result["steps_per_s"]
        report[f"steps_per_s_{key}_runs"] = [r["steps_per_s"] for r in repeats]
        for part in ("step_ms", "step_cpu_ms", "backend_ms", "render_ms", "other_ms"):
            report[f"{part}_{key}"] = result[part]
        report[f"episodes_{key}"] = result["episodes"]
        report[f"first_reset_ms_{key}"] = repeats[0]["reset_ms"][0]
        report.update({f"{name}_{key}": value for name, value in _reset_stats(*resets[key]).items()})
    report["repeat"] = args.repeat
    # Resets are reported per configuration (more vehicles load a larger state); the target
    # applies to the headline configuration.
    report["reset_config"] = reset_key
    report.update(_reset_stats(*resets[reset_key]))
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    metadrive = measure_metadrive(min(args.steps, 1000))
    report["steps_per_s_metadrive_topdown"] = metadrive.get("steps_per_s")
    report["metadrive_note"] = metadrive.get("skipped", "")
    report["target_met"] = not _shortfall(report)
    if args.json:
        print(json.dumps(report))
    else:
        _print_table(report, runs)
    return 0


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or any(n < 0 for n in counts):
        raise ValueError(f"--vehicles must be comma-separated ints >= 0 such as 0,50,150, got {text!r}")
    return counts


def _shortfall(report: dict[str, Any]) -> str:
    """Which half of the target failed, with the measured value ("" when it is met)."""
    rate, reset = report.get("steps_per_s_bev_50"), report["reset_ms"]
    missed = []
    if rate is None:
        missed.append("no BEV run at 50 vehicles")
    elif rate < TARGET_STEPS_PER_S:
        missed.append(f"{rate:,.0f} steps/s")
    if reset is None:
        missed.append("reset not timed")
    elif reset > TARGET_RESET_MS:
        missed.append(f"reset {reset:.1f} ms")
    return ", ".join(missed)


def _reset_cell(report: dict[str, Any], key: str) -> str:
    mean, p95 = report[f"reset_ms_{key}"], report[f"reset_ms_p95_{key}"]
    return "-" if mean is None else f"{mean:.1f} ({p95:.1f})"


def _print_table(report: dict[str, Any], runs: list[tuple[str, int]]) -> None:
    from rich.table import Table

    from found_rl.tables import fitting_console

    reference = report.get("steps_per_s_bev_50")
    # The title is its own soft-wrapped line: as a table title it would wrap at the table's width
    # and split on long scenario paths.
    title = (
        f"found-rl DrivingEnv on one core ({report['scenario']}, {report['core']}; "
        f"median of {report['repeat']} runs)"
    )
    table = Table()
    columns = ("obs", "vehicles", "steps/s", "runs (min-max)", "vs BEV@50", "ms/step", "CPU ms/step", "sim ms")
    columns += ("BEV ms", "rest ms", "reset ms (p95)")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for observation, vehicles in runs:
        key = f"{observation}_{vehicles}"
        rate = report[f"steps_per_s_{key}"]
        ratio = f"{rate / reference:.2f}x" if reference else "-"
        repeats = report[f"steps_per_s_{key}_runs"]
        table.add_row(
            observation,
            str(vehicles),
            f"{rate:,.0f}",
            f"{min(repeats):,.0f}-{max(repeats):,.0f} ({len(repeats)})",
            ratio,
            f"{report[f'step_ms_{key}']:.2f}",
            f"{report[f'step_cpu_ms_{key}']:.2f}",
            f"{report[f'backend_ms_{key}']:.2f}",
            f"{report[f'render_ms_{key}']:.2f}",
            f"{report[f'other_ms_{key}']:.2f}",
            _reset_cell(report, key),
        )
    if report["steps_per_s_metadrive_topdown"] is not None:
        table.add_row("metadrive top-down", "-", f"{report['steps_per_s_metadrive_topdown']:,.0f}", *[""] * 8)
    console = fitting_console(table)
    console.print(title, soft_wrap=True)
    console.print(table)
    config = report["reset_config"]
    if report["reset_ms"] is None:
        resets = f"reset ({config}): not timed (no episode ended and --resets 0)"
    else:
        resets = (
            f"reset ({config}): {report['reset_ms']:.1f} ms mean ({report['reset_cpu_ms']:.1f} ms CPU), "
            f"{report['reset_ms_p95']:.1f} ms p95 over "
            f"{report['resets_timed']} resets (target <= {TARGET_RESET_MS:.0f} ms)"
        )
    console.print(
        f"{resets}; peak RSS {report['peak_rss_mb']:.0f} MB; "
        f"one trivial numpy call took {report['numpy_call_us']:.2f} us "
        "(about 0.5 us on a quiet core)",
        soft_wrap=True,
    )
    if report["metadrive_note"]:
        console.print(f"MetaDrive: {report['metadrive_note']}", soft_wrap=True)
    verdict = "met" if report["target_met"] else f"NOT met ({_shortfall(report)})"
    target = f">= {TARGET_STEPS_PER_S:.0f} steps/s with BEV at 50 vehicles, reset <= {TARGET_RESET_MS:.0f} ms"
    console.print(f"target ({target}): {verdict}", soft_wrap=True)
