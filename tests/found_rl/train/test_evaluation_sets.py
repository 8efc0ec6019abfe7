"""Which towns a run is evaluated on, which count as unseen (by their roads), and the headline over them."""

import json
from pathlib import Path

import pytest

from found_rl.maps import build_network, network_hash, scenario_network
from found_rl.scenario import load_scenario
from found_rl.train.config import load_run_config, validate_run_config
from found_rl.train.evaluation_sets import EvaluationSet, headline, plan_evaluation_sets
from found_rl.train.evaluator import EvaluationResult

from .conftest import DATA, tiny_run_config

HELDOUT = Path(__file__).resolve().parents[3] / "scenarios" / "heldout_town.yaml"
TINY_TOWN = Path(__file__).resolve().parents[1] / "evaluation" / "data" / "tiny_town.yaml"


def config(tmp_path, **evaluation):
    return validate_run_config(tiny_run_config(evaluation={"enabled": True, "routes": 2, **evaluation}), "t", tmp_path)


def test_an_evaluation_town_no_training_scenario_drives_is_unseen(tmp_path):
    same_map = tmp_path / "same_map.yaml"  # another file, another route length, the training map
    same_map.write_text((DATA / "tiny_random.yaml").read_text().replace("random_length_m: 60", "random_length_m: 90"))
    plan = plan_evaluation_sets(config(tmp_path, scenarios=[str(HELDOUT), str(same_map)]), tmp_path / "routes")
    by_name = {s.name: s for s in plan.sets}
    assert set(by_name) == {"tiny_random (seen)", "heldout_town", "same_map (seen)"}
    assert by_name["heldout_town"].unseen
    assert not by_name["same_map (seen)"].unseen and not by_name["tiny_random (seen)"].unseen
    assert {p.name for p in (tmp_path / "routes").iterdir()} == {
        "seen_tiny_random.xml", "heldout_town.xml", "seen_same_map.xml"}
    assert plan.first_town_train_routes is None  # random routes: training draws from other seeds


def test_the_training_roads_under_another_spec_are_seen_and_the_run_folder_says_why(tmp_path):
    built = build_network(load_scenario(DATA / "tiny_random.yaml").map)
    copy = tmp_path / "copied.net.xml"  # the training town's network, as a file with another header
    copy.write_text(built.read_text().replace("<net ", "<!-- copied -->\n<net ", 1))
    routes = tmp_path / "one.xml"
    routes.write_text((TINY_TOWN.parent / "quickstart_one_route.xml").read_text())
    other_spec = tmp_path / "other_spec.yaml"
    other_spec.write_text(f"map: {{file: {copy}}}\nroutes: {{file: {routes}}}\n")
    plan = plan_evaluation_sets(config(tmp_path, seen=False, scenarios=[str(other_spec), str(HELDOUT)]),
                                tmp_path / "routes")
    by_name = {s.name: s for s in plan.sets}
    assert network_hash(copy) != network_hash(built)
    assert not by_name["other_spec (seen)"].unseen and by_name["heldout_town"].unseen
    assert by_name["other_spec (seen)"].seen_by == ("training: tiny_random.yaml",)
    record = plan.towns_record()
    assert record["advisor_towns"] == "no advisor"
    assert [(s["name"], s["unseen"], s["network"]) for s in record["sets"]] == [
        ("other_spec (seen)", False, by_name["other_spec (seen)"].network),
        ("heldout_town", True, scenario_network(load_scenario(HELDOUT)))]


def advisor_model(tmp_path: Path, card: dict) -> dict:
    """An hf advisor section whose model folder holds ``card`` as its advisor card."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "found_rl_advisor.json").write_text(json.dumps(card))
    return {"spawn": "hf", "spawn_options": {"model": str(model)}}


def test_a_town_the_advisor_was_trained_on_is_seen(tmp_path):
    heldout = scenario_network(load_scenario(HELDOUT))
    data = tiny_run_config(evaluation={"enabled": True, "seen": False, "scenarios": [str(HELDOUT)]},
                           advisor=advisor_model(tmp_path, {"training_towns": {heldout: "heldout_town"}}),
                           guidance={"awag": {"enabled": True}})
    plan = plan_evaluation_sets(validate_run_config(data, "t", tmp_path), tmp_path / "routes")
    assert [(s.name, s.unseen, s.seen_by) for s in plan.sets] == [
        ("heldout_town (seen)", False, ("advisor data: heldout_town",))]
    assert plan.advisor.description.startswith("1 town(s) from ")


def test_advisor_towns_under_an_older_identity_are_unknown_not_unseen_by_accident(tmp_path):
    legacy = network_hash(build_network(load_scenario(HELDOUT).map))  # what older cards recorded
    data = tiny_run_config(evaluation={"enabled": True, "seen": False, "scenarios": [str(HELDOUT)]},
                           advisor=advisor_model(tmp_path, {"training_towns": {legacy: "heldout_town"}}),
                           guidance={"awag": {"enabled": True}})
    plan = plan_evaluation_sets(validate_run_config(data, "t", tmp_path), tmp_path / "routes")
    assert not plan.advisor.is_known and "older network identity" in plan.towns_record()["advisor_towns"]


def test_a_suite_adds_its_towns_with_their_first_routes(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"towns:\n  - {{scenario: {HELDOUT}, kind: grid}}\n")
    plan = plan_evaluation_sets(config(tmp_path, seen=False, suite=str(suite), routes_per_town=2, repetitions=3),
                                tmp_path / "routes")
    (town,) = plan.sets
    assert (town.name, town.kind, town.unseen, plan.repetitions) == ("heldout_town", "grid", True, 3)
    assert (tmp_path / "routes" / "heldout_town.xml").read_text().count("<route ") == 2


def test_seen_false_evaluates_only_the_listed_towns(tmp_path):
    plan = plan_evaluation_sets(config(tmp_path, seen=False, scenarios=[str(HELDOUT)]), tmp_path / "routes")
    assert [(s.name, s.unseen) for s in plan.sets] == [("heldout_town", True)]


def result(rc: float, ds: float, routes: tuple[tuple[float, ...], ...] = ()) -> EvaluationResult:
    return EvaluationResult("policy", rc, ds, ds / rc, {"red_light": 1.0}, "r.json", None,
                            driving_scores=routes, route_completions=routes)


def test_every_town_and_the_headline_carry_their_bootstrap_intervals():
    a = EvaluationSet("a", Path("a.yaml"), Path("a.xml"), unseen=True, network="roads-v1:a", kind="grid")
    b = EvaluationSet("b", Path("b.yaml"), Path("b.xml"), unseen=True, network="roads-v1:b", kind="real city")
    row = headline({"a": (a, result(0.5, 0.5, ((0.0,), (1.0,))), 2), "b": (b, result(0.5, 0.5, ((0.5,),)), 1)})
    assert row["towns"]["a"]["driving_score_ci"] == [0.0, 1.0]  # worked out in test_intervals
    assert row["driving_score_ci"] == [0.0, 1.0]  # the three routes pooled (test_intervals)
    assert row["towns"]["b"]["network"] == "roads-v1:b" and row["towns"]["b"]["kind"] == "real city"


def test_the_headline_is_the_route_weighted_unseen_mean_and_seen_towns_stay_apart():
    unseen_a = EvaluationSet("a", Path("a.yaml"), Path("a.xml"), unseen=True)
    unseen_b = EvaluationSet("b", Path("b.yaml"), Path("b.xml"), unseen=True)
    seen = EvaluationSet("t (seen)", Path("t.yaml"), Path("t.xml"), unseen=False)
    row = headline({"a": (unseen_a, result(0.9, 0.6), 3), "b": (unseen_b, result(0.3, 0.3), 1),
                    "t (seen)": (seen, result(1.0, 1.0), 5)})
    assert row["eval_town_unseen"] is True
    assert row["route_completion"] == pytest.approx((3 * 0.9 + 0.3) / 4)  # the seen town is left out
    assert row["seen"]["route_completion"] == pytest.approx(1.0)
    assert row["towns"]["t (seen)"]["unseen"] is False and row["towns"]["a"]["routes"] == 3
    only_seen = headline({"t (seen)": (seen, result(1.0, 1.0), 5)})
    assert only_seen["eval_town_unseen"] is False and only_seen["route_completion"] == 1.0


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [([], "scenario: is an empty list; name at least one training scenario"),
     (["missing.yaml"], "scenario[0]: "), ],
)
def test_training_scenario_lists_are_checked(tmp_path, scenario, expected):
    import yaml

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**tiny_run_config(), "scenario": scenario}))
    with pytest.raises((ValueError, FileNotFoundError), match=expected.replace("[", r"\[").replace("]", r"\]")):
        load_run_config(path)


def test_a_missing_evaluation_town_is_named(tmp_path):
    import yaml

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_run_config(evaluation={"scenarios": ["nowhere.yaml"]})))
    with pytest.raises(FileNotFoundError, match=r"evaluation.scenarios\[0\]: .*nowhere.yaml: no such scenario file"):
        load_run_config(path)


def test_nothing_to_evaluate_is_refused(tmp_path):
    with pytest.raises(ValueError, match="nothing to evaluate"):
        config(tmp_path, seen=False)
