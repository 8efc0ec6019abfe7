"""``found-rl bench sampler``: a tiny end-to-end run and its JSON report (no timing assertions)."""

from __future__ import annotations

import argparse
import json

import pytest

from found_rl.bench import sampler as bench_sampler


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")  # added by found_rl.cli.bench in the real CLI
    bench_sampler.configure(parser)
    return parser.parse_args(argv)


def test_quick_json_report_has_every_sampler_and_clip_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parse(
        [
            "--quick",
            "--json",
            "--clips",
            "2",
            "3",
            "--transitions",
            "40",
            "--step-ms",
            "0.2",
        ]
    )
    assert args.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["env"] == "synthetic" and "NOT a simulator" in report["env_description"]
    for key in (
        "speedup_vs_single",
        "valid_fraction",
        "seconds_per_10k",
        "env_time_share",
    ):
        assert set(report[key]) == {"fast", "global_reset", "per_clip_reset"}
        for per_clip_count in report[key].values():
            assert set(per_clip_count) == {"2", "3"}
            assert all(value > 0 for value in per_clip_count.values())
    assert all(0 < f <= 1 for f in report["valid_fraction"]["fast"].values())
    assert report["valid_fraction"]["per_clip_reset"] == {"2": 1.0, "3": 1.0}


def test_table_names_the_env_and_every_sampler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parse(["--quick", "--clips", "2", "--transitions", "20", "--step-ms", "0.2"])
    assert args.run(args) == 0
    table = capsys.readouterr().out
    assert table.startswith("env: synthetic CARLA-like env")
    for name in ("single", "per_clip_reset", "global_reset", "fast"):
        assert f"\n{name} " in table


@pytest.mark.parametrize(
    "argv, parameter",
    [
        (["--transitions", "0"], "--transitions"),
        (["--clips", "0"], "--clips"),
        (["--rho", "1.5"], "rho"),
    ],
)
def test_bad_arguments_name_the_parameter(argv: list[str], parameter: str) -> None:
    args = parse(["--quick", "--step-ms", "0.2", *argv])
    with pytest.raises(ValueError, match=parameter):
        args.run(args)
