"""``found-rl bench sim``: how fast the SUMO ``DrivingEnv`` steps and resets on one core.

Measured in one process pinned to one core (OpenCV single-threaded):

- env-steps/s with full BEV observations at 0, 50 and 150 background vehicles (the scenario's
  traffic overridden), and with state-only observations at 50 vehicles;
- where each step's time goes, stage by stage: SUMO's own step, reading the snapshot out of
  SUMO, the rest of the backend (ego dynamics, placing the ego, respawning traffic), BEV
  rendering, the hazard queries, the infraction monitor, route tracking, and the rest (state
  vector, reward, info);
- reset time (mean and p95, ms) per configuration, and the peak resident memory (MB);
- MetaDrive's top-down observation side by side, when ``metadrive`` is importable;
- with ``--backend-only``, the SUMO world alone instead (``SumoBackend.reset`` / ``.step``, no
  BEV, no reward), so the env's numbers split into "simulator" and "the rest": the time to
  build the backend (network, traffic warm-up), seeded resets (median and p95), and steps while
  the ego cruises at about 6 m/s, with the part spent in SUMO's own ``simulation.step``.

A simple route-following controller drives (pure pursuit on the route, 6 m/s): episodes end
as they would in training (route completed, red light, timeout) and are reset; steps/s counts
time inside ``env.step`` only (``CPU ms/step``: the thread's CPU time there, which on a shared
machine leaves out waiting for a core), resets are timed separately. How busy the machine was
is printed beside the numbers: the load average and the time of one trivial numpy call. Targets
(issue 14, one quiet core): >= 1500 steps/s with BEV and 50 vehicles, >= 800 with 150, reset p95
<= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from pathlib import Path
from typing import Any

from found_rl.argtypes import finite_float
from found_rl.bench.load import describe_load, load_average, numpy_call_us
from found_rl.bench.stage_timing import STAGES, Timer, stage_breakdown_ms, stage_timers, timed
from found_rl.errors import MissingPathError, UserError

TARGET_STEPS_PER_S = 1500.0
"""Env-steps/s with full BEV at 50 vehicles."""
TARGET_STEPS_PER_S_150 = 800.0
"""Env-steps/s with full BEV at 150 vehicles."""
TARGET_RESET_MS = 50.0
"""p95 of the headline configuration's resets."""
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "small_grid.yaml"
DEFAULT_VEHICLES = "0,50,150"
"""Background vehicle counts of the BEV runs (``--backend-only`` keeps the scenario's own)."""
BACKEND_EPISODE_STEPS = 500
"""``--backend-only`` starts a fresh (untimed) episode this often while timing steps."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO,
                        help="scenario YAML (default: small_grid, a quickstart training town)")
    parser.add_argument("--steps", type=int, default=3000, help="env steps per measurement (default 3000)")
    parser.add_argument("--resets", type=int, default=30, help="extra timed resets (default 30)")
    parser.add_argument(
        "--vehicles",
        default=None,
        help=f"comma-separated background vehicle counts for the BEV runs (default {DEFAULT_VEHICLES}; "
        "with --backend-only: the scenario's own)",
    )
    parser.add_argument("--walkers", type=int, default=None, help="fixed walker count (default: the scenario's)")
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
    parser.add_argument(
        "--backend-only",
        action="store_true",
        help="time the SUMO backend alone (reset and step, no BEV, no reward) at each --vehicles count",
    )
    parser.set_defaults(run=run)


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
    """Step ``env`` ``steps`` times with :func:`follow_route`; time steps, resets and stages."""
    reset_ms: list[float] = []
    reset_cpu_ms: list[float] = []
    step_s, step_cpu_s, episodes = 0.0, 0.0, 0
    with stage_timers(env) as timers:
        _timed_reset(env, reset_ms, reset_cpu_ms, seed=seed)
        for _ in range(steps):
            action = follow_route(env)
            # CPU time of this thread as well: on a shared machine it excludes the time spent
            # waiting for a core, so it is the closer estimate of a quiet core.
            for timer in timers.values():
                timer.enabled = True
            cpu_start = time.thread_time()
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            step_s += time.perf_counter() - start
            step_cpu_s += time.thread_time() - cpu_start
            for timer in timers.values():
                timer.enabled = False
            if terminated or truncated:
                episodes += 1
                _timed_reset(env, reset_ms, reset_cpu_ms)
    stages = stage_breakdown_ms(timers, step_s, steps)
    stages_cpu = stage_breakdown_ms(timers, step_cpu_s, steps, cpu=True)
    step_ms = 1000 * step_s / steps
    backend_ms = stages["sumo_step"] + stages["snapshot_read"] + stages["backend_other"]
    return {
        "steps_per_s": steps / step_s,
        "step_ms": step_ms,
        "step_cpu_ms": 1000 * step_cpu_s / steps,
        "backend_ms": backend_ms,
        "render_ms": stages["render"],
        "other_ms": step_ms - backend_ms - stages["render"],
        "stage_ms": stages,
        "stage_cpu_ms": stages_cpu,
        "episodes": episodes,
        "reset_ms": reset_ms,
        "reset_cpu_ms": reset_cpu_ms,
    }


def _timed_reset(env: Any, wall_ms: list[float], cpu_ms: list[float], **kwargs: Any) -> Any:
    """``env.reset(**kwargs)`` (an env's or a backend's), appending its wall-clock and CPU
    milliseconds; returns what the reset returned."""
    cpu_start = time.thread_time()
    start = time.perf_counter()
    result = env.reset(**kwargs)
    wall_ms.append(1000 * (time.perf_counter() - start))
    cpu_ms.append(1000 * (time.thread_time() - cpu_start))
    return result


def measure_backend(scenario: Any, steps: int, resets: int) -> dict[str, Any]:
    """Time ``SumoBackend`` alone: building it, ``resets`` seeded resets, and ``steps`` steps.

    The ego cruises at about 6 m/s; a fresh episode starts every :data:`BACKEND_EPISODE_STEPS`
    steps (not timed). Times are wall-clock and this thread's CPU time; ``sumo_step_cpu_ms``
    is the part of a step spent in SUMO's own ``simulation.step``.
    """
    import numpy as np

    from found_rl.actions import Controls
    from found_rl.sim.sumo.backend import SumoBackend

    start = time.perf_counter()
    backend = SumoBackend(scenario)
    build_s = time.perf_counter() - start
    try:
        first_ms: list[float] = []
        snapshot = _timed_reset(backend, first_ms, [], seed=0)
        reset_ms: list[float] = []
        reset_cpu_ms: list[float] = []
        for seed in range(1, resets + 1):
            snapshot = _timed_reset(backend, reset_ms, reset_cpu_ms, seed=seed)
        sumo = Timer(enabled=False)
        simulation = backend._libsumo.simulation
        sumo_step = simulation.step
        simulation.step = timed(sumo_step, sumo)
        seen, step_s, step_cpu_s = [], 0.0, 0.0
        try:
            for step in range(steps):
                if step and step % BACKEND_EPISODE_STEPS == 0:
                    snapshot = backend.reset(seed=1000 + step)
                acc = 0.5 if snapshot.ego.speed_mps < 6.0 else 0.0
                sumo.enabled = True
                cpu_start = time.thread_time()
                start = time.perf_counter()
                snapshot = backend.step(Controls(acc, 0.0, 0.0))
                step_s += time.perf_counter() - start
                step_cpu_s += time.thread_time() - cpu_start
                sumo.enabled = False
                seen.append(len(snapshot.vehicles))
        finally:
            simulation.step = sumo_step
    finally:
        backend.close()
    timed_resets = bool(reset_ms)
    return {
        "vehicles": list(scenario.traffic.vehicles),
        "walkers": list(scenario.traffic.walkers),
        "build_s": build_s,
        "first_reset_ms": first_ms[0],
        "reset_ms_median": float(np.median(reset_ms)) if timed_resets else None,
        "reset_ms_p95": float(np.percentile(reset_ms, 95)) if timed_resets else None,
        "reset_cpu_ms_median": float(np.median(reset_cpu_ms)) if timed_resets else None,
        "reset_cpu_ms_p95": float(np.percentile(reset_cpu_ms, 95)) if timed_resets else None,
        "step_ms": 1000 * step_s / steps,
        "step_cpu_ms": 1000 * step_cpu_s / steps,
        "sumo_step_cpu_ms": 1000 * sumo.cpu_seconds / steps,
        "vehicles_seen_mean": float(np.mean(seen)),
        "observe_radius_m": scenario.traffic.observe_radius_m,
    }


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

    counts = _parse_counts(args.vehicles) if args.vehicles is not None else None
    if args.steps < 1 or args.resets < 0 or args.state_vehicles < 0 or args.repeat < 1:
        raise UserError(
            f"--steps must be >= 1, --resets >= 0, --state-vehicles >= 0 and --repeat >= 1, got --steps "
            f"{args.steps} --resets {args.resets} --state-vehicles {args.state_vehicles} --repeat {args.repeat}"
        )
    if args.walkers is not None and args.walkers < 0:
        raise ValueError(f"--walkers must be >= 0, got {args.walkers}")
    cv2.setNumThreads(1)
    core = "not pinned (--no-pin)" if args.no_pin else _pin_to_one_core()
    if args.scenario == DEFAULT_SCENARIO and not DEFAULT_SCENARIO.is_file():
        raise MissingPathError(
            f"the default scenario {DEFAULT_SCENARIO} ships with the found-rl source tree, not with an "
            "installed wheel; pass --scenario FILE (e.g. scenarios/small_grid.yaml of a clone)"
        )
    scenario = load_scenario(args.scenario)

    def scenario_with(vehicles: int | None) -> Any:
        """The scenario with ``vehicles`` background cars (None: its own) and the flags' overrides."""
        traffic: dict[str, Any] = {} if vehicles is None else {"vehicles": (vehicles, vehicles)}
        if args.walkers is not None:
            traffic["walkers"] = (args.walkers, args.walkers)
        if args.warmup_s is not None:
            traffic["warmup_s"] = args.warmup_s
        return scenario.model_copy(update={"traffic": scenario.traffic.model_copy(update=traffic)})

    if args.backend_only:
        return _run_backend_only(args, [scenario_with(n) for n in counts or [None]], core)
    counts = counts or _parse_counts(DEFAULT_VEHICLES)
    report: dict[str, Any] = {
        "scenario": str(args.scenario),
        "steps": args.steps,
        "walkers": list(scenario.traffic.walkers),
        "core": core,
        "numpy_call_us": numpy_call_us(),
        "load_average": load_average(),
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
        for part in ("step_ms", "step_cpu_ms", "backend_ms", "render_ms", "other_ms", "stage_ms", "stage_cpu_ms"):
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


def _run_backend_only(args: argparse.Namespace, scenarios: list[Any], core: str) -> int:
    """``--backend-only``: :func:`measure_backend` per traffic configuration, as lines or JSON."""
    report: dict[str, Any] = {
        "scenario": str(args.scenario),
        "steps": args.steps,
        "resets": args.resets,
        "core": core,
        "numpy_call_us": numpy_call_us(),
        "load_average": load_average(),
        "backend": [measure_backend(scenario, args.steps, args.resets) for scenario in scenarios],
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"SUMO backend alone on {report['scenario']} ({core}); wall-clock / CPU time of this thread")
    for run in report["backend"]:
        vehicles, walkers = ("-".join(map(str, sorted(set(run[key])))) for key in ("vehicles", "walkers"))
        step_ms, step_cpu_ms = run["step_ms"], run["step_cpu_ms"]
        print(f"vehicles {vehicles}, walkers {walkers}")
        print(f"  build + warm-up   {run['build_s']:.2f} s, first reset {run['first_reset_ms'] / 1000:.2f} s")
        if run["reset_ms_median"] is None:
            print("  reset             not timed (--resets 0)")
        else:
            print(
                f"  reset             wall median {run['reset_ms_median']:.1f} ms (p95 {run['reset_ms_p95']:.1f}); "
                f"CPU median {run['reset_cpu_ms_median']:.1f} ms (p95 {run['reset_cpu_ms_p95']:.1f})"
            )
        print(
            f"  step              wall {step_ms:.3f} ms ({1e3 / step_ms:.0f} steps/s); CPU {step_cpu_ms:.3f} ms "
            f"({1e3 / step_cpu_ms:.0f} steps/s), of which SUMO {run['sumo_step_cpu_ms']:.3f} ms"
        )
        radius_m = run["observe_radius_m"]
        print(f"  vehicles seen     mean {run['vehicles_seen_mean']:.1f} within {radius_m:.0f} m of the ego")
    print(describe_load(report["numpy_call_us"], report["load_average"]))
    return 0


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or any(n < 0 for n in counts):
        raise UserError(f"--vehicles must be comma-separated ints >= 0 such as 0,50,150, got {text!r}")
    return counts


def _shortfall(report: dict[str, Any]) -> str:
    """Which targets were missed, with the measured values ("" when all are met)."""
    missed = []
    for vehicles, target in ((50, TARGET_STEPS_PER_S), (150, TARGET_STEPS_PER_S_150)):
        rate = report.get(f"steps_per_s_bev_{vehicles}")
        if rate is None:
            missed.append(f"no BEV run at {vehicles} vehicles")
        elif rate < target:
            missed.append(f"{rate:,.0f} steps/s at {vehicles} vehicles")
    reset = report["reset_ms_p95"]
    if reset is None:
        missed.append("reset not timed")
    elif reset > TARGET_RESET_MS:
        missed.append(f"reset p95 {reset:.1f} ms")
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
        f"found-rl DrivingEnv on one core ({report['scenario']}, {report['core']}; median of {report['repeat']} runs)"
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
    stages = Table(title="ms per env step, stage by stage: wall-clock / CPU")
    stages.add_column("stage", no_wrap=True)
    for observation, vehicles in runs:
        stages.add_column(f"{observation} {vehicles}", justify="right", no_wrap=True)
    for name in STAGES:
        cells = []
        for observation, vehicles in runs:
            key = f"{observation}_{vehicles}"
            cells.append(f"{report[f'stage_ms_{key}'][name]:.3f} / {report[f'stage_cpu_ms_{key}'][name]:.3f}")
        stages.add_row(name.replace("_", " "), *cells)
    console = fitting_console(table)
    console.print(title, soft_wrap=True)
    console.print(table)
    fitting_console(stages, console).print(stages)
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
        + describe_load(report["numpy_call_us"], report["load_average"]),
        soft_wrap=True,
    )
    if report["metadrive_note"]:
        console.print(f"MetaDrive: {report['metadrive_note']}", soft_wrap=True)
    verdict = "met" if report["target_met"] else f"NOT met ({_shortfall(report)})"
    target = (
        f">= {TARGET_STEPS_PER_S:.0f} steps/s with BEV at 50 vehicles, >= {TARGET_STEPS_PER_S_150:.0f} at 150, "
        f"reset p95 <= {TARGET_RESET_MS:.0f} ms"
    )
    console.print(f"target ({target}): {verdict}", soft_wrap=True)
