"""Smoke test of ``found-rl bench learners``: tiny runs end to end (no parity claim)."""

import argparse
import json

import pytest

from found_rl.bench import learners


def run_bench(capsys, *flags: str) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    learners.configure(parser)
    args = parser.parse_args(["--json", "--seeds", "1", "--eval-episodes", "1", *flags])
    assert args.run(args) == 0
    return json.loads(capsys.readouterr().out)


def test_tiny_parity_run_prints_the_report(capsys, progress_bars):
    report = run_bench(capsys, "--rows", "sac", "ppo", "--sac-steps", "60", "--ppo-steps", "512")
    assert progress_bars.finished("bench learners")  # one step per training run
    for key in (
        "sac_pendulum_return",
        "ppo_cartpole_return",
        "sac_pendulum_wall_s",
        "ppo_cartpole_wall_s",
    ):
        assert key in report
    assert "drqv2_pendulum_return" not in report  # only the rows asked for
    assert -2_000 < report["sac_pendulum_return"] <= 0
    assert 1 <= report["ppo_cartpole_return"] <= 500
    assert report["ppo_cartpole_steps"] == 512


def test_tiny_drqv2_and_fast_rows_report_their_keys(capsys):
    report = run_bench(
        capsys,
        "--rows",
        "drqv2",
        "ppo_fast",
        "--drqv2-steps",
        "40",
        "--fast-steps",
        "40",
        "--fast-step-ms",
        "0.01",
        "--fast-clips",
        "2",
    )
    assert -2_000 < report["drqv2_pendulum_return"] <= 0
    assert 1 <= report["ppo_fast_cartpole_return"] <= 500
    assert report["ppo_fast_cartpole_steps"] >= 40 and report["ppo_single_clip_cartpole_steps"] >= 40
    assert report["ppo_fast_wall_ratio"] > 0
    assert isinstance(report["ppo_fast_target_met"], bool)


def test_bad_rows_and_latency_are_refused(capsys):
    parser = argparse.ArgumentParser()
    learners.configure(parser)
    for flags in (["--rows", "td3"], ["--fast-step-ms", "-1"], ["--fast-clips", "1"]):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(flags)
        assert exit_info.value.code == 2


def test_an_unknown_pendulum_learner_is_named():
    with pytest.raises(ValueError, match="learner: expected one of sac, drqv2, got 'td3'"):
        learners.train_pendulum("td3", seed=0)
