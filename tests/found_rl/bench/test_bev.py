"""``found-rl bench bev`` runs end to end (no timing assertions) on its synthetic scenes."""

from __future__ import annotations

import argparse
import json

import numpy as np

from found_rl.bench import bev
from found_rl.bench.bev import time_render
from found_rl.bench.bev_scenes import synthetic_scene


def main(argv: list[str]) -> int:
    """``found-rl bench bev ARGV`` through the command's own parser."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    bev.configure(parser)
    args = parser.parse_args(argv)
    return args.run(args)


def test_benchmark_prints_one_json_object(capsys):
    assert main(["--json", "--seconds", "0.01"]) == 0
    results = json.loads(capsys.readouterr().out)
    cases = {"empty", "town_50v_20w_20l", "dense_50v_20w_20l", "town_150v_40w_40l"}
    assert cases <= set(results)
    assert all(results[case]["render_ms_median"] > 0 for case in cases)
    assert results["target_case"] == "town_50v_20w_20l" and results["target_render_ms"] == 0.2
    assert results["target_met"] == (results["town_50v_20w_20l"]["render_ms_median"] <= 0.2)
    assert results["numpy_call_us"] > 0 and len(results["load_average"]) == 3


def test_table_states_the_target_and_the_load(capsys):
    assert main(["--seconds", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "target (<= 0.2 ms per render, town_50v_20w_20l, one quiet core)" in out
    assert "load average" in out and "numpy call" in out


def test_time_render_reports_counts():
    timing = time_render(num_vehicles=5, num_walkers=2, num_stop_lines=1, min_seconds=0.0)
    assert timing.renders >= 80 and timing.vehicles == 5


def test_synthetic_vehicles_do_not_overlap():
    snapshot = synthetic_scene(np.random.default_rng(0), spread_m=60.0)[0]
    xy = snapshot.vehicles.xy
    distance = np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))
    np.fill_diagonal(distance, np.inf)
    assert distance.min() >= 3.4  # lane slots: 6.5 m along a lane, 3.5 m across lanes
