"""``vlm evaluate``'s report on hand-made town datasets: baselines, per-town breakdown, the overlap check.

The training data goes (lane follow, target ahead) 4 times and turns left (left command, target
to the left) 3 times, in town A. The evaluated data turns left twice in town B and goes twice
in town A, so the majority baseline (always go) is right on town A only and the prompt-only
baseline everywhere; the model's answers are made up.
"""

import json
import shutil

import pytest

from found_rl import cli
from found_rl.vlm.evaluate import report_of
from found_rl.vlm.examples import load_chat_examples
from found_rl.vlm.training_data import TrainingData, training_data
from tests.town_datasets import Row, write_town_dataset

GO, TURN_LEFT = (0.5, 0.0), (0.5, -0.4)
LEFT_PROMPT = {"command": 1, "target_ego": (8.0, -4.0)}


def training_rows() -> list[Row]:
    return [
        *[Row(0, "A", "net-a", action=GO)] * 2, Row(0, "A", "net-a", action=TURN_LEFT, **LEFT_PROMPT),
        *[Row(1, "A", "net-a", action=GO)] * 2, *[Row(1, "A", "net-a", action=TURN_LEFT, **LEFT_PROMPT)] * 2,
    ]


def evaluated_rows(town_a: str = "A") -> list[Row]:
    return [*[Row(0, "B", "net-b", action=TURN_LEFT, **LEFT_PROMPT)] * 2, *[Row(1, town_a, "net-a", action=GO)] * 2]


@pytest.fixture
def datasets(tmp_path):
    train = write_town_dataset(tmp_path / "train", training_rows())
    return train, write_town_dataset(tmp_path / "other", evaluated_rows())


def test_baselines_per_town_and_overlap_on_hand_made_data(datasets):
    train, other = datasets
    examples = load_chat_examples(other)
    training = training_data({"data": str(train), "eval_fraction": 0.0}, [other], examples, 0.0, 0)
    assert len(training.samples) == 7 and training.networks == {"net-a": "A"}
    report = report_of(examples, [TURN_LEFT, None, GO, (0.0, 0.0)], training)

    assert report["class_agreement"] == pytest.approx(2 / 4) and report["parse_rate"] == pytest.approx(3 / 4)
    majority, prompt_only = report["baselines"]["majority"], report["baselines"]["prompt_only"]
    assert majority == pytest.approx({"class_agreement": 0.5, "mae_steer": 0.2, "mae_acc": 0.0})
    assert prompt_only == pytest.approx({"class_agreement": 1.0, "mae_steer": 0.0, "mae_acc": 0.0})
    assert report["baselines_fitted_on"] == f"the training episodes of {train}"

    assert set(report["per_town"]) == {"A", "B"}
    assert report["per_town"]["A"]["baselines"]["majority"]["class_agreement"] == 1.0
    assert report["per_town"]["B"]["baselines"]["majority"]["class_agreement"] == 0.0
    assert report["per_town"]["B"]["baselines"]["prompt_only"]["class_agreement"] == 1.0
    assert set(report["per_command"]) == {"LEFT", "LANEFOLLOW"}
    assert report["towns_overlap_training"] == [{"network": "net-a", "town": "A", "training_town": "A"}]


def test_overlap_is_by_network_hash_not_by_name(tmp_path, datasets):
    train, _ = datasets
    renamed = write_town_dataset(tmp_path / "renamed", evaluated_rows(town_a="A-copy"))
    examples = load_chat_examples(renamed)
    report = report_of(examples, [GO] * 4, training_data({"data": str(train)}, [renamed], examples, 0.0, 0))
    assert report["towns_overlap_training"] == [{"network": "net-a", "town": "A-copy", "training_town": "A"}]


def test_datasets_without_towns_have_no_breakdown_and_an_unknown_overlap(tmp_path):
    rows = [Row(0, None, None, action=GO), Row(1, None, None, action=TURN_LEFT, **LEFT_PROMPT)] * 2
    examples = load_chat_examples(write_town_dataset(tmp_path / "old", rows))
    unknown = TrainingData(None, "unknown", None)
    report = report_of(examples, [GO] * 4, unknown)
    assert "per_town" not in report and report["towns_overlap_training"] is None
    assert report["baselines_fitted_on"].startswith("the evaluated samples, two halves of its episodes")


def run_cli(argv, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_other_towns_split_scores_every_sample_and_warns_of_a_shared_town(datasets, tiny_vlm_dir, tmp_path, capsys):
    from vlm_server.backends.hf_checks import ADVISOR_CARD

    _, other = datasets
    model = shutil.copytree(tiny_vlm_dir, tmp_path / "model")
    card = {"image_hw": [192, 192], "data": "/gone", "training_towns": {"net-a": "A"}}
    (model / ADVISOR_CARD).write_text(json.dumps(card))
    argv = ["vlm", "evaluate", "--data", str(other), "--model", str(model), "--split", "other-towns",
            "--max-new-tokens", "2", "--no-progress"]
    code, out, err = run_cli([*argv, "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["samples"] == 4 and report["split"]["name"] == "other-towns"
    assert report["towns_overlap_training"] == [{"network": "net-a", "town": "A", "training_town": "A"}]
    assert "warning: 1 road network(s) of --data are also in the model's training data (A)" in err
    assert set(report["baselines"]) == {"majority", "prompt_only"} and set(report["per_town"]) == {"A", "B"}
    fitted_on = report["baselines_fitted_on"]  # the training samples are gone, their towns recorded
    assert fitted_on.startswith("the evaluated samples") and "/gone is not on this machine" in fitted_on

    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "major." in out and "prompt" in out and "per town" in out and "warning" in err
