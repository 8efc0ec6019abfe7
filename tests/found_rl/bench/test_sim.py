"""Smoke test: ``found-rl bench sim`` runs end to end at a tiny size and reports every key."""

import argparse
import json
from pathlib import Path

import pytest

from found_rl.bench import sim

QUICKSTART = Path(__file__).resolve().parents[3] / "scenarios" / "small_grid.yaml"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    sim.configure(parser)
    return parser.parse_args(argv)


def test_bench_sim_json_has_every_key(capsys):
    args = parse(
        [
            "--json",
            "--steps",
            "15",
            "--resets",
            "2",
            "--vehicles",
            "0,5",
            "--state-vehicles",
            "5",
        ]
        + ["--warmup-s", "5", "--no-pin", "--repeat", "2"]
    )
    assert args.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    keys = (
        "steps_per_s_bev_0",
        "steps_per_s_bev_5",
        "steps_per_s_state_5",
        "reset_ms",
        "reset_ms_p95",
        "peak_rss_mb",
    )
    for key in keys:
        assert report[key] > 0, key
    assert report["backend_ms_bev_5"] > 0 and report["render_ms_bev_5"] > 0
    assert report["render_ms_state_5"] == 0.0  # state-only observations render nothing
    stages = report["stage_ms_bev_5"]
    assert list(stages) == list(sim.STAGES)
    for name in ("sumo_step", "snapshot_read", "render", "hazards", "infractions", "route_tracking"):
        assert stages[name] > 0, name
    assert sum(stages.values()) == pytest.approx(report["step_ms_bev_5"])  # the stages add up to the step
    assert report["stage_ms_state_5"]["render"] == 0.0
    assert sum(report["stage_cpu_ms_bev_5"].values()) == pytest.approx(report["step_cpu_ms_bev_5"])
    assert report["backend_ms_bev_5"] == pytest.approx(
        sum(stages[n] for n in ("sumo_step", "snapshot_read", "backend_other"))
    )
    assert len(report["load_average"]) == 3
    assert report["reset_config"] == "bev_5" and report["resets_timed"] >= 2
    assert report["reset_ms"] == report["reset_ms_bev_5"]  # the headline is the middle BEV run's
    assert report["resets_timed_state_5"] < report["resets_timed"]  # the extra resets are bev_5's
    assert len(report["steps_per_s_bev_5_runs"]) == 2 and report["repeat"] == 2
    runs = sorted(report["steps_per_s_bev_5_runs"])
    assert report["steps_per_s_bev_5"] in runs  # the median run (upper of two) is reported whole
    assert "metadrive" in report["metadrive_note"] or report["steps_per_s_metadrive_topdown"] > 0


def test_table_output_names_the_runs(capsys, tmp_path, monkeypatch):
    # A long scenario path and a narrow terminal must not wrap or truncate the report's lines.
    monkeypatch.setenv("COLUMNS", "60")
    deep = tmp_path / ("a_rather_long_folder_name_" * 3) / "scenarios"
    deep.mkdir(parents=True)
    scenario = deep / "small_grid.yaml"
    scenario.write_text(QUICKSTART.read_text())
    argv = ["--scenario", str(scenario), "--steps", "5", "--resets", "0", "--vehicles", "3", "--state-vehicles", "3"]
    args = parse(argv)
    args.warmup_s, args.no_pin = 5.0, True
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert f"({scenario}, not pinned (--no-pin); median of 1 runs)" in out
    assert "target (>= 1500 steps/s with BEV at 50 vehicles, >= 800 at 150" in out and "…" not in out
    assert "stage by stage" in out and "load average" in out
    for header in ("vehicles", "steps/s", "runs (min-max)", "vs BEV@50", "CPU ms/step", "reset ms (p95)"):
        assert header in out, header
    assert "reset (bev_3): not timed" in out  # five steps end no episode, and --resets 0


def test_json_without_timed_resets_is_valid_json(capsys):
    args = parse(["--json", "--steps", "5", "--resets", "0", "--vehicles", "3", "--state-vehicles", "3"])
    args.warmup_s, args.no_pin = 5.0, True
    assert args.run(args) == 0
    report = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)
    assert report["reset_ms"] is None and report["resets_timed"] == 0 and report["target_met"] is False


def test_backend_only_times_sumo_alone(capsys):
    argv = ["--backend-only", "--steps", "20", "--resets", "2", "--vehicles", "0,3", "--walkers", "1"]
    args = parse(["--json", *argv, "--warmup-s", "5", "--no-pin"])
    assert args.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    empty, busy = report["backend"]
    assert (empty["vehicles"], busy["vehicles"], busy["walkers"]) == ([0, 0], [3, 3], [1, 1])
    for key in ("build_s", "first_reset_ms", "reset_ms_median", "reset_cpu_ms_p95", "step_ms", "sumo_step_cpu_ms"):
        assert busy[key] > 0, key
    assert busy["sumo_step_cpu_ms"] <= busy["step_cpu_ms"]  # SUMO's own step is part of the backend's
    assert empty["vehicles_seen_mean"] == 0.0 and "steps_per_s_bev_0" not in report  # no env was built
    args = parse(["--backend-only", "--steps", "20", "--resets", "0", "--vehicles", "3", "--warmup-s", "5", "--no-pin"])
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert "SUMO backend alone" in out and "of which SUMO" in out and "reset             not timed" in out


def test_repeat_must_be_positive():
    args = parse(["--repeat", "0"])
    with pytest.raises(ValueError, match="--repeat"):
        args.run(args)


def test_negative_walkers_are_rejected():
    args = parse(["--walkers", "-1"])
    with pytest.raises(ValueError, match="--walkers"):
        args.run(args)


@pytest.mark.parametrize("vehicles", ["", "a,b", "-1"])
def test_bad_vehicle_counts_are_rejected(vehicles):
    args = parse(["--vehicles", vehicles])
    with pytest.raises(ValueError, match="--vehicles"):
        args.run(args)


def test_a_missing_default_scenario_says_to_pass_one(monkeypatch, tmp_path):
    # As in a wheel install, where the source tree's scenarios/ folder is absent.
    monkeypatch.setattr(sim, "DEFAULT_SCENARIO", tmp_path / "scenarios" / "small_grid.yaml")
    args = parse([])
    args.scenario = sim.DEFAULT_SCENARIO
    with pytest.raises(FileNotFoundError, match="pass --scenario FILE"):
        args.run(args)


def test_stage_timers_put_everything_back():
    import found_rl.env as env_module
    from found_rl import hazards
    from found_rl.env import DrivingEnv
    from found_rl.routes.progress import RouteTracker
    from found_rl.scenario import load_scenario
    from tests.scenes import ScriptedBackend

    update = RouteTracker.update
    env = DrivingEnv(load_scenario(QUICKSTART), backend=ScriptedBackend())
    parts = (env.backend, env.renderer, env.monitor)
    result = sim.measure_env(env, steps=5, seed=0)
    assert (env.backend, env.renderer, env.monitor) == parts
    assert env_module.hazards is hazards and RouteTracker.update is update
    assert result["stage_ms"]["render"] > 0 and result["stage_ms"]["sumo_step"] == 0.0  # no SUMO here
