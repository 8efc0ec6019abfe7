"""Smoke test: ``found-rl bench sim`` runs end to end at a tiny size and reports every key."""

import argparse
import json

import pytest

from found_rl.bench import sim


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
    assert report["resets_timed"] >= 2
    assert len(report["steps_per_s_bev_5_runs"]) == 2 and report["repeat"] == 2
    runs = sorted(report["steps_per_s_bev_5_runs"])
    assert report["steps_per_s_bev_5"] in runs  # the median run (upper of two) is reported whole
    assert "metadrive" in report["metadrive_note"] or report["steps_per_s_metadrive_topdown"] > 0


def test_table_output_names_the_runs(capsys):
    args = parse(["--steps", "5", "--resets", "0", "--vehicles", "3", "--state-vehicles", "3"])
    args.warmup_s, args.no_pin = 5.0, True
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert "runs (min-max)" in out and "median of 1 runs" in out and "target" in out


def test_repeat_must_be_positive():
    args = parse(["--repeat", "0"])
    with pytest.raises(ValueError, match="--repeat"):
        args.run(args)


@pytest.mark.parametrize("vehicles", ["", "a,b", "-1"])
def test_bad_vehicle_counts_are_rejected(vehicles):
    args = parse(["--vehicles", vehicles])
    with pytest.raises(ValueError, match="--vehicles"):
        args.run(args)
