"""Which towns a run is evaluated on, which count as unseen, and the headline over them."""

from pathlib import Path

import pytest

from found_rl.train.config import load_run_config, validate_run_config
from found_rl.train.evaluation_sets import EvaluationSet, headline, plan_evaluation_sets
from found_rl.train.evaluator import EvaluationResult

from .conftest import DATA, tiny_run_config

HELDOUT = Path(__file__).resolve().parents[3] / "scenarios" / "heldout_town.yaml"


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


def test_seen_false_evaluates_only_the_listed_towns(tmp_path):
    plan = plan_evaluation_sets(config(tmp_path, seen=False, scenarios=[str(HELDOUT)]), tmp_path / "routes")
    assert [(s.name, s.unseen) for s in plan.sets] == [("heldout_town", True)]


def result(rc: float, ds: float) -> EvaluationResult:
    return EvaluationResult("policy", rc, ds, ds / rc, {"red_light": 1.0}, "r.json", None)


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
