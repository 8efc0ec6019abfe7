"""Time the SUMO backend's reset and step (a measuring script, not a test).

    python -m found_rl.sim.sumo.timing scenarios/town_grid.yaml --vehicles 50 --walkers 30

Prints reset and step times, both wall-clock and CPU time of this process (on a shared,
busy machine the CPU time is the better estimate of what a quiet core achieves), and how
much of a step SUMO's own ``simulation.step`` takes.
The env-level benchmark with BEV rendering is ``found-rl bench sim``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from found_rl.actions import Controls
from found_rl.scenario import load_scenario
from found_rl.sim.sumo.backend import SumoBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument(
        "--vehicles",
        type=int,
        help="fixed background vehicle count (default: the scenario's)",
    )
    parser.add_argument(
        "--walkers", type=int, help="fixed walker count (default: the scenario's)"
    )
    parser.add_argument("--resets", type=int, default=20)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()

    scenario = load_scenario(args.scenario)
    traffic = scenario.traffic
    if args.vehicles is not None:
        traffic = traffic.model_copy(
            update={"vehicles": (args.vehicles, args.vehicles)}
        )
    if args.walkers is not None:
        traffic = traffic.model_copy(update={"walkers": (args.walkers, args.walkers)})
    scenario = scenario.model_copy(update={"traffic": traffic})

    started = time.perf_counter()
    backend = SumoBackend(scenario)
    built_s = time.perf_counter() - started
    started = time.perf_counter()
    snapshot = backend.reset(seed=0)
    first_reset_s = time.perf_counter() - started

    reset_ms, reset_cpu_ms = [], []
    for seed in range(1, args.resets + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        snapshot = backend.reset(seed=seed)
        reset_ms.append((time.perf_counter() - started) * 1e3)
        reset_cpu_ms.append((time.process_time() - started_cpu) * 1e3)

    simulation = backend._libsumo.simulation
    sumo_step = simulation.step
    sumo_cpu_s = 0.0

    def timed_step(*args):
        nonlocal sumo_cpu_s
        started = time.process_time()
        result = sumo_step(*args)
        sumo_cpu_s += time.process_time() - started
        return result

    simulation.step = timed_step
    seen = []
    wall_s = cpu_s = 0.0
    for step in range(args.steps):
        if (
            step and step % 500 == 0
        ):  # a fresh episode now and then; resets are timed above
            snapshot = backend.reset(seed=1000 + step)
        acc = 0.5 if snapshot.ego.speed_mps < 6.0 else 0.0
        started, started_cpu = time.perf_counter(), time.process_time()
        snapshot = backend.step(Controls(acc, 0.0, 0.0))
        wall_s += time.perf_counter() - started
        cpu_s += time.process_time() - started_cpu
        seen.append(len(snapshot.vehicles))
    simulation.step = sumo_step
    backend.close()
    step_ms, step_cpu_ms = wall_s / args.steps * 1e3, cpu_s / args.steps * 1e3

    print(f"scenario          {args.scenario}")
    print(f"build + warm-up   {built_s:.2f} s, first reset {first_reset_s:.2f} s")
    print(
        f"reset             wall median {np.median(reset_ms):.1f} ms (p95 {np.percentile(reset_ms, 95):.1f}); "
        f"CPU median {np.median(reset_cpu_ms):.1f} ms (p95 {np.percentile(reset_cpu_ms, 95):.1f})"
    )
    print(
        f"step              wall {step_ms:.3f} ms ({1e3 / step_ms:.0f} steps/s); CPU {step_cpu_ms:.3f} ms "
        f"({1e3 / step_cpu_ms:.0f} steps/s), of which SUMO {sumo_cpu_s / args.steps * 1e3:.3f} ms"
    )
    print(
        f"vehicles seen     mean {np.mean(seen):.1f} within {scenario.traffic.observe_radius_m:.0f} m of the ego"
    )


if __name__ == "__main__":
    main()
