import argparse
import json
import math

from found_rl.bench import server


def test_server_benchmark_runs_end_to_end_and_reports_integrity(capsys, progress_bars):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    server.configure(parser)
    args = parser.parse_args(
        [
            "--json",
            "--backends",
            "fixed-cost",
            "--clients",
            "1,64",
            "--requests",
            "150",
            "--duration-s",
            "2",
            "--loss-requests",
            "400",
            "--base-ms",
            "5",
        ]
    )
    assert args.run(args) == 0
    assert progress_bars.finished("bench server")  # one step per measured load
    report = json.loads(capsys.readouterr().out)
    for key in (
        "batching_speedup_64",
        "overhead_p99_ms",
        "lost",
        "duplicated",
        "mismatched",
        "levels",
    ):
        assert key in report
    assert (
        report["lost"] == 0 and report["duplicated"] == 0 and report["mismatched"] == 0
    )
    assert report["loss_requests"] == 400
    assert (
        math.isfinite(report["batching_speedup_64"])
        and report["batching_speedup_64"] > 0
    )
    assert {(r["batching"], r["clients"]) for r in report["levels"]} == {
        ("on", 1),
        ("on", 64),
        ("off", 1),
        ("off", 64),
    }
    assert all(r["lost"] == 0 and r["replies"] > 0 for r in report["levels"])
    off_rows = [r for r in report["levels"] if r["batching"] == "off"]
    assert all(r["mean_batch_size"] == 1.0 for r in off_rows)


def test_bad_client_levels_are_a_value_error():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    server.configure(parser)
    args = parser.parse_args(["--clients", "0"])
    try:
        args.run(args)
    except ValueError as exc:
        assert "--clients" in str(exc)
    else:
        raise AssertionError("expected ValueError")
