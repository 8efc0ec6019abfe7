"""Smoke test of ``found-rl bench learners``: tiny runs end to end (no parity claim)."""

import argparse
import json

from found_rl.bench import learners


def test_tiny_parity_run_prints_the_report(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    learners.configure(parser)
    args = parser.parse_args(
        [
            "--json",
            "--seeds",
            "1",
            "--sac-steps",
            "60",
            "--ppo-steps",
            "512",
            "--eval-episodes",
            "1",
        ]
    )
    assert args.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    for key in (
        "sac_pendulum_return",
        "ppo_cartpole_return",
        "sac_pendulum_wall_s",
        "ppo_cartpole_wall_s",
    ):
        assert key in report
    assert -2_000 < report["sac_pendulum_return"] <= 0
    assert 1 <= report["ppo_cartpole_return"] <= 500
    assert report["ppo_cartpole_steps"] == 512
