"""``found-rl eval`` end to end on one short quickstart route, and every bad input."""

import json
import socket
import time

import pytest

MODULE = "found_rl.cli.evaluate"


@pytest.fixture
def eval_args(tiny_town):
    return ["--scenario", str(tiny_town), "--no-progress"]


def test_expert_eval_writes_leaderboard_json_and_resume_skips_finished_routes(
    tmp_path, eval_args, run_command
):
    out = tmp_path / "results.json"
    argv = [*eval_args, "--agent", "expert", "--out", str(out), "--video-dir", str(tmp_path / "videos")]
    assert run_command(MODULE, argv) == 0
    first = json.loads(out.read_text())
    records = first["_checkpoint"]["records"]
    assert [r["route_id"] for r in records] == ["RouteScenario_0_rep0"]
    assert records[0]["status"] == "Completed"
    assert records[0]["scores"]["score_composed"] > 90.0
    assert first["entry_status"] == "Finished"
    assert (tmp_path / "videos" / "0000_route0_rep0.gif").stat().st_size > 0

    started = time.perf_counter()
    assert run_command(MODULE, argv) == 0  # resume: nothing left to drive
    assert json.loads(out.read_text())["_checkpoint"]["records"] == records
    assert time.perf_counter() - started < 60


@pytest.mark.parametrize(
    ("agent", "error", "match"),
    [
        ("pilot", ValueError, "unknown agent 'pilot'"),
        ("checkpoint:", ValueError, "unknown agent"),
        ("checkpoint:/no/such/policy.pt", FileNotFoundError, "policy.pt"),
    ],
)
def test_bad_agent_specs_fail_before_the_simulator_starts(
    tmp_path, eval_args, run_command, agent, error, match
):
    with pytest.raises(error, match=match):
        run_command(MODULE, [*eval_args, "--agent", agent, "--out", str(tmp_path / "r.json")])
    assert not (tmp_path / "r.json").exists()


def test_unreachable_advisor_fails_after_a_bounded_wait(tmp_path, eval_args, run_command):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(ValueError, match="no advisor server answered"):
        run_command(
            MODULE,
            [
                *eval_args,
                "--agent",
                f"advisor:http://127.0.0.1:{port}",
                "--advisor-timeout",
                "1",
                "--out",
                str(tmp_path / "r.json"),
            ],
        )
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("content", ["{broken", json.dumps({"something": "else"})])
def test_corrupt_or_foreign_out_file_is_refused_and_kept(tmp_path, eval_args, run_command, content):
    out = tmp_path / "r.json"
    out.write_text(content)
    with pytest.raises(ValueError, match="refusing to overwrite"):
        run_command(MODULE, [*eval_args, "--agent", "expert", "--out", str(out)])
    assert out.read_text() == content


def test_route_file_without_routes_is_named(tmp_path, tiny_town, run_command):
    empty = tmp_path / "empty.xml"
    empty.write_text("<routes></routes>")
    with pytest.raises(ValueError, match=r"empty\.xml: no <route>"):
        run_command(
            MODULE,
            [
                "--scenario",
                str(tiny_town),
                "--routes",
                str(empty),
                "--agent",
                "expert",
                "--out",
                str(tmp_path / "r.json"),
            ],
        )


def test_random_route_scenario_needs_a_route_file(tmp_path, quickstart, run_command):
    with pytest.raises(ValueError, match="pass --routes FILE"):
        run_command(
            MODULE, ["--scenario", str(quickstart), "--agent", "expert", "--out", str(tmp_path / "r.json")]
        )


def test_bad_repetitions_is_refused(tmp_path, eval_args, run_command):
    with pytest.raises(ValueError, match="--repetitions"):
        run_command(
            MODULE, [*eval_args, "--agent", "expert", "--repetitions", "0", "--out", str(tmp_path / "r.json")]
        )


def test_a_suite_is_driven_town_by_town_with_intervals_and_resumes(tmp_path, tiny_town, run_command):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"towns:\n  - {{scenario: {tiny_town}, kind: grid}}\nrepetitions: 2\n")
    out = tmp_path / "suite_out"
    argv = ["--suite", str(suite), "--agent", "expert", "--out", str(out), "--workers", "1", "--no-progress"]
    assert run_command(MODULE, argv) == 0
    report = json.loads((out / "suite.json").read_text())
    (town,) = report["towns"]
    assert (town["name"], town["kind"], town["routes"], town["episodes"]) == ("tiny_town", "grid", 1, 2)
    assert town["network"].startswith("roads-v1:")
    ds = town["driving_score"]
    assert ds["low"] <= ds["mean"] <= ds["high"] and ds["mean"] > 0.9
    assert report["suite"]["driving_score"] == ds and report["repetitions"] == 2
    records = json.loads((out / "tiny_town.json").read_text())["_checkpoint"]["records"]
    assert [r["route_id"] for r in records] == ["RouteScenario_0_rep0", "RouteScenario_0_rep1"]

    started = time.perf_counter()
    assert run_command(MODULE, argv) == 0  # resume: nothing left to drive
    assert json.loads((out / "suite.json").read_text())["suite"] == report["suite"]
    assert time.perf_counter() - started < 30


def test_suite_only_flags_are_refused_where_they_do_not_apply(tmp_path, tiny_town, run_command):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"towns:\n  - {{scenario: {tiny_town}}}\n")
    with pytest.raises(ValueError, match="--routes: applies to --scenario only"):
        run_command(MODULE, ["--suite", str(suite), "--routes", "r.xml", "--agent", "expert", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="--routes-per-town: applies to --suite only"):
        run_command(MODULE, ["--scenario", str(tiny_town), "--routes-per-town", "1", "--agent", "expert",
                             "--out", str(tmp_path / "r.json")])
