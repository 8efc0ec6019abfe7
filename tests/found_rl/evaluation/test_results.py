"""The leaderboard JSON layout, atomic saves, and refusing files that are not ours."""

import json

import pytest

from found_rl.evaluation.results import ResultsFile, build_record
from found_rl.events import EpisodeStatus, EpisodeSummary, Infraction, InfractionKind
from found_rl.metrics import route_scores

IDENTITY = {"scenario": "s.yaml", "agent": "expert", "repetitions": 1, "seed": 0}


def record(index: int, completion: float = 1.0, collisions: int = 0) -> dict:
    infractions = tuple(
        Infraction(InfractionKind.COLLISION_VEHICLE, 5, (12.25, -3.5), actor_id="veh7", detail="hit veh7")
        for _ in range(collisions)
    )
    status = EpisodeStatus.COMPLETED if completion >= 1.0 else EpisodeStatus.FAILED_COLLISION
    summary = EpisodeSummary(
        f"{index}", status, completion, 500.0, 500.0 * completion, 0.0, 40.0, 400, infractions
    )
    return build_record(index, 0, summary, route_scores(summary), duration_system_s=2.0)


def test_layout_matches_the_leaderboard(tmp_path):
    results = ResultsFile(tmp_path / "results.json", IDENTITY, total=2)
    results.add(record(0))
    results.add(record(1, completion=0.5, collisions=1))
    data = json.loads((tmp_path / "results.json").read_text())

    checkpoint = data["_checkpoint"]
    assert checkpoint["progress"] == [2, 2]
    assert data["entry_status"] == "Finished"
    assert len(data["labels"]) == len(data["values"])
    first, second = checkpoint["records"]
    assert first["route_id"] == "RouteScenario_0_rep0"
    assert first["status"] == "Completed"
    assert first["scores"] == {
        "score_route": 100.0,
        "score_penalty": 100.0,
        "score_composed": 100.0,
        "score_composite": 100.0,
    }
    assert second["status"] == "Failed - Agent collided"
    assert second["scores"]["score_composed"] == pytest.approx(30.0)
    assert second["infractions"]["collisions_vehicle"] == ["hit veh7 at (x=12.2, y=-3.5, z=0.0)"]
    assert set(second["infractions"]) >= {
        "collisions_pedestrian",
        "red_light",
        "route_dev",
        "vehicle_blocked",
    }
    assert {"route_length", "duration_game", "duration_system"} <= set(second["meta"])

    global_record = checkpoint["global_record"]
    assert global_record["index"] == -1 and global_record["status"] == "Failed"
    assert global_record["scores"]["score_composed"] == pytest.approx(65.0)
    assert global_record["scores"]["score_route"] == pytest.approx(75.0)
    # One collision over 0.5 + 0.25 driven km.
    assert global_record["infractions"]["collisions_vehicle"] == pytest.approx(1 / 0.75)


def test_reopening_resumes_with_finished_indices(tmp_path):
    path = tmp_path / "results.json"
    ResultsFile(path, IDENTITY, total=3).add(record(0))
    reopened = ResultsFile(path, IDENTITY, total=3)
    assert reopened.finished_indices == {0}
    assert json.loads(path.read_text())["entry_status"] == "Started"
    reopened.add(record(0, completion=0.5))  # replaces, never duplicates
    assert len(ResultsFile(path, IDENTITY, total=3).records) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"_checkpoint": {"records": []}}), "not a found-rl results file"),
        (json.dumps([1, 2]), "not a found-rl results file"),
    ],
)
def test_corrupt_or_foreign_file_is_never_overwritten(tmp_path, content, reason):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=reason):
        ResultsFile(path, IDENTITY, total=1)
    assert path.read_text() == content


def test_results_of_another_run_are_refused(tmp_path):
    path = tmp_path / "results.json"
    ResultsFile(path, IDENTITY, total=1).add(record(0))
    with pytest.raises(ValueError, match="different run"):
        ResultsFile(path, {**IDENTITY, "agent": "checkpoint:x.pt"}, total=1)


def test_save_leaves_no_temporary_files(tmp_path):
    results = ResultsFile(tmp_path / "results.json", IDENTITY, total=1)
    results.add(record(0))
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def _corrupt(data: dict, how: str) -> None:
    records = data["_checkpoint"]["records"]
    if how == "found_rl_list":
        data["found_rl"] = []
    elif how == "checkpoint_list":
        data["_checkpoint"] = []
    elif how == "record_not_object":
        records[0] = 1
    elif how == "no_index":
        del records[0]["index"]
    elif how == "text_index":
        records[0]["index"] = "x"
    elif how == "no_scores":
        del records[0]["scores"]
    elif how == "index_out_of_run":
        records[0]["index"] = 5
    elif how == "repeated_index":
        records.append(dict(records[0]))


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("found_rl_list", "not a found-rl results file"),
        ("checkpoint_list", "not a found-rl results file"),
        ("record_not_object", "_checkpoint.records.0: Input should be a valid dictionary"),
        ("no_index", "_checkpoint.records.0.index: Field required"),
        ("text_index", "_checkpoint.records.0.index: Input should be a valid integer"),
        ("no_scores", "_checkpoint.records.0.scores: Field required"),
        ("index_out_of_run", "indices [5] repeat or lie outside this run's 2 episodes"),
        ("repeated_index", "indices [0, 0] repeat"),
    ],
)
def test_resuming_a_corrupt_results_file_names_the_problem_and_keeps_the_file(tmp_path, how, message):
    path = tmp_path / "results.json"
    ResultsFile(path, IDENTITY, total=2).add(record(0))
    data = json.loads(path.read_text())
    _corrupt(data, how)
    path.write_text(json.dumps(data))
    before = path.read_text()
    with pytest.raises(ValueError, match="refusing to overwrite --out") as caught:
        ResultsFile(path, IDENTITY, total=2)
    assert message in str(caught.value)
    assert path.read_text() == before


def busy_record() -> dict:
    """Half of a 500 m route (0.25 km driven), 25 of 250 m outside the lanes, and 1 pedestrian,
    2 vehicle, 3 red-light infractions and 1 route deviation."""
    kinds = [InfractionKind.COLLISION_PEDESTRIAN] + [InfractionKind.COLLISION_VEHICLE] * 2
    kinds += [InfractionKind.RED_LIGHT] * 3 + [InfractionKind.ROUTE_DEVIATION]
    infractions = tuple(Infraction(kind, step, (float(step), 0.0)) for step, kind in enumerate(kinds))
    summary = EpisodeSummary("9", EpisodeStatus.FAILED_COLLISION, 0.5, 500.0, 250.0, 25.0, 40.0, 400, infractions)
    return build_record(0, 0, summary, route_scores(summary), duration_system_s=2.0)


def test_global_values_line_up_with_their_labels(tmp_path):
    results = ResultsFile(tmp_path / "results.json", IDENTITY, total=1)
    results.add(busy_record())
    data = json.loads((tmp_path / "results.json").read_text())
    # IP = (1 - 0.1) * 0.5 * 0.6^2 * 0.7^3 = 0.055566; DS = 0.5 * IP; rates per 0.25 km;
    # "Off-road infractions" is the leaderboard's outside-lane percentage.
    assert dict(zip(data["labels"], data["values"], strict=True)) == {
        "Avg. driving score": "2.778",
        "Avg. route completion": "50.000",
        "Avg. infraction penalty": "5.557",
        "Collisions with pedestrians": "4.000",
        "Collisions with vehicles": "8.000",
        "Collisions with layout": "0.000",
        "Red lights infractions": "12.000",
        "Stop sign infractions": "0.000",
        "Off-road infractions": "10.000",
        "Route deviations": "4.000",
        "Route timeouts": "0.000",
        "Agent blocked": "0.000",
    }


def test_record_scores_and_meta_are_hand_computed():
    entry = busy_record()
    assert entry["scores"]["score_route"] == pytest.approx(50.0)
    assert entry["scores"]["score_penalty"] == pytest.approx(5.5566)
    assert entry["scores"]["score_composed"] == pytest.approx(2.7783)
    assert entry["scores"]["score_composite"] == entry["scores"]["score_composed"]
    meta = entry["meta"]
    assert meta["outside_lane_percentage"] == pytest.approx(10.0)
    assert meta["driven_km"] == pytest.approx(0.25)
    assert meta["infraction_counts"]["red_light"] == 3
    assert meta["infractions_per_km"]["red_light"] == pytest.approx(12.0)
    assert meta["infractions_per_km"]["collisions_vehicle"] == pytest.approx(8.0)


def test_global_record_recovers_the_outside_lane_percentage(tmp_path):
    results = ResultsFile(tmp_path / "results.json", IDENTITY, total=2)
    results.add(busy_record())
    results.add(record(1))  # a clean completed 0.5 km route
    global_record = json.loads((tmp_path / "results.json").read_text())["_checkpoint"]["global_record"]
    # 10 % of 0.25 km over 0.75 km driven; IP mean of 0.055566 and 1.
    assert global_record["infractions"]["outside_route_lanes"] == pytest.approx(100 * 0.025 / 0.75)
    assert global_record["scores"]["score_penalty"] == pytest.approx(100 * (0.055566 + 1.0) / 2)
    assert global_record["meta"]["driven_km"] == pytest.approx(0.75)


def test_record_name_carries_route_and_repetition():
    summary = EpisodeSummary("7", EpisodeStatus.COMPLETED, 1.0, 100.0, 100.0, 0.0, 10.0, 100, ())
    entry = build_record(3, 2, summary, route_scores(summary), duration_system_s=1.0)
    assert entry["route_id"] == "RouteScenario_7_rep2"
    assert entry["index"] == 3
    assert entry["meta"]["repetition"] == 2
