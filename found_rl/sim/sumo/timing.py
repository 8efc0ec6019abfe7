"""Time the SUMO backend's reset and step (a measuring script, not a test).

    python -m found_rl.sim.sumo.timing scenarios/town_grid.yaml --vehicles 50 --walkers 30

Prints median/p95 reset time, mean step time, and how much of a step SUMO itself takes.
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
    parser.add_argument("--vehicles", type=int, help="fixed background vehicle count (default: the scenario's)")
    parser.add_argument("--walkers", type=int, help="fixed walker count (default: the scenario's)")
    parser.add_argument("--resets", type=int, default=20)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()

    scenario = load_scenario(args.scenario)
    traffic = scenario.traffic
    if args.vehicles is not None:
        traffic = traffic.model_copy(update={"vehicles": (args.vehicles, args.vehicles)})
    if args.walkers is not None:
        traffic = traffic.model_copy(update={"walkers": (args.walkers, args.walkers)})
    scenario = scenario.model_copy(update={"traffic": traffic})

    started = time.perf_counter()
    backend = SumoBackend(scenario)
    built_s = time.perf_counter() - started
    started = time.perf_counter()
    snapshot = backend.reset(seed=0)
    first_reset_s = time.perf_counter() - started

    reset_ms = []
    for seed in range(1, args.resets + 1):
        started = time.perf_counter()
        snapshot = backend.reset(seed=seed)
        reset_ms.append((time.perf_counter() - started) * 1e3)

    libsumo = backend._libsumo
    sumo_step = libsumo.simulationStep
    sumo_s = 0.0

    def timed_step() -> None:
        nonlocal sumo_s
        started = time.perf_counter()
        sumo_step()
        sumo_s += time.perf_counter() - started

    libsumo.simulationStep = timed_step
    seen = []
    started = time.perf_counter()
    for step in range(args.steps):
        if step and step % 500 == 0:  # a fresh episode now and then; its reset is not counted
            started_reset = time.perf_counter()
            snapshot = backend.reset(seed=1000 + step)
            started += time.perf_counter() - started_reset
        acc = 0.5 if snapshot.ego.speed_mps < 6.0 else 0.0
        snapshot = backend.step(Controls(acc, 0.0, 0.0))
        seen.append(libsumo.vehicle.getIDCount() - 1)
    step_ms = (time.perf_counter() - started) / args.steps * 1e3
    libsumo.simulationStep = sumo_step
    backend.close()

    print(f"scenario          {args.scenario}")
    print(f"build + warm-up   {built_s:.2f} s, first reset {first_reset_s:.2f} s")
    print(f"reset             median {np.median(reset_ms):.1f} ms, p95 {np.percentile(reset_ms, 95):.1f} ms")
    print(f"step              {step_ms:.3f} ms ({1e3 / step_ms:.0f} steps/s), of which SUMO {sumo_s / args.steps * 1e3:.3f} ms")
    print(f"vehicles in SUMO  mean {np.mean(seen):.1f}")


if __name__ == "__main__":
    main()
