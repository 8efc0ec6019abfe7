"""``found-rl clip``: user mistakes exit 2 naming the flag or file; tiny finetune -> evaluate and
finetune -> probe -> ladder runs."""

import json

import pytest

from found_rl import cli
from tests.found_rl.cli.test_bad_input import run_cli
from tests.found_rl.clip.conftest import micro_model, write_dataset

__all__ = ["micro_model"]  # the fixture, shared with tests/found_rl/clip


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_dataset(tmp_path / "data", episodes=4, frames_per_episode=12, side=32)
    (tmp_path / "one").mkdir()
    write_dataset(tmp_path / "one" / "data", episodes=1, frames_per_episode=12, side=32)
    (tmp_path / "exists.pt").write_bytes(b"x")
    return tmp_path


FINETUNE = ["clip", "finetune", "--data", "data", "--no-progress"]
PROBE = ["clip", "probe", "--data", "data", "--no-progress"]
LADDER = ["clip", "ladder", "--data", "data", "--no-progress"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "exists.pt"], "--out exists.pt: exists; pass --resume"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "new.pt", "--resume"], "--resume: new.pt does not exist"),
        ([*FINETUNE, "--model", "no-such-model", "--out", "m.pt"], "--model 'no-such-model': not one of"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--image-size", "72", "--out", "m.pt"], "--image-size 72"),
        ([*FINETUNE, "--model", "found-rl-rn-tiny", "--image-size", "48", "--out", "m.pt"], "multiple of 32"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "m.pt", "--lr", "nan"], "--lr"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "m.pt", "--val-fraction", "1"], "--val-fraction"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "m.pt", "--device", "cuda:7"], "--device cuda:7"),
        (["clip", "finetune", "--data", "nowhere", "--model", "found-rl-vit-tiny", "--out", "m.pt"], "--data nowhere"),
        (
            ["clip", "finetune", "--data", "one/data", "--model", "found-rl-vit-tiny", "--out", "m.pt"]
            + ["--no-progress"],
            "1 episode(s): a held-out split by episode needs at least 2",
        ),
        (["clip", "evaluate", "--data", "data", "--checkpoint", "exists.pt"], "exists.pt: cannot be read"),
        (["clip", "evaluate", "--data", "data", "--checkpoint", "missing.pt"], "missing.pt does not exist"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "m.pt", "--epochs", "0"], "--epochs"),
        ([*FINETUNE, "--model", "found-rl-vit-tiny", "--out", "m.pt", "--max-minutes", "0"], "--max-minutes"),
        (["clip", "probe", "--data", "nowhere", "--out", "p.pt"], "--data nowhere: no such folder"),
        ([*PROBE, "--out", "exists.pt"], "--out exists.pt: exists"),
        ([*PROBE, "--out", "p.pt", "--max-minutes", "-1"], "--max-minutes"),
        ([*PROBE, "--out", "p.pt", "--batch-size", "1"], "--batch-size"),
        ([*PROBE, "--out", "p.pt", "--model", "no-such-model"], "--model 'no-such-model': not one of"),
        ([*PROBE, "--out", "p.pt", "--same-split-as", "missing.pt"], "--same-split-as missing.pt: no such file"),
        ([*PROBE, "--out", "p.pt", "--same-split-as", "exists.pt"], "exists.pt: cannot be read"),
        (["clip", "ladder", "--data", "nowhere", "--checkpoint", "c.pt", "--probe", "p.pt"], "--data nowhere"),
        ([*LADDER, "--checkpoint", "exists.pt", "--probe", "p.pt"], "exists.pt: cannot be read"),
        ([*LADDER, "--checkpoint", "c.pt"], "the following arguments are required: --probe"),
    ],
)
def test_mistakes_exit_2_naming_the_flag_or_file(data, capsys, argv, message):
    code, err = run_cli(argv, capsys)
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1 or "usage:" in err


def test_finetune_then_evaluate_json(data, capsys, micro_model):
    argv = [*FINETUNE, "--model", micro_model, "--out", "m.pt", "--epochs", "1", "--batch-size", "8"]
    argv += ["--image-size", "16"]
    assert cli.main(argv) == 0
    assert "serve it: found-rl serve --clip openclip --clip-option checkpoint=m.pt" in capsys.readouterr().out
    assert cli.main(["clip", "evaluate", "--data", "data", "--checkpoint", "m.pt", "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0.0 <= report["auc"] <= 1.0 and 0.0 <= report["top1"] <= 1.0
    assert report["scope"].startswith("held-out episodes (1 of 4") and report["prior"] is not None
    assert report["auc_lift"] == pytest.approx(report["model_auc"] - report["prior_auc"])
    assert 0.0 <= report["shuffled_auc"] <= 1.0
    assert (report["objective"], report["context"], report["image_input"]) == ("logit-adjusted", "command-speed", "rgb")
    # 12 held-out frames in one context: too few for a per-context AUC, and named
    assert report["per_context"] == {} and report["skipped_contexts"] == {"follow the current lane / moderate": 12}


def test_other_towns_per_town_rows_and_the_training_towns_overlap(tmp_path, monkeypatch, capsys, micro_model):
    from tests.town_datasets import Row, write_town_dataset

    monkeypatch.chdir(tmp_path)
    # trained on towns A and B; evaluated on B again and on C, and on an old dataset without towns
    train_rows = [Row(e, "A" if e % 2 else "B", "net-a" if e % 2 else "net-b") for e in range(4) for _ in range(8)]
    write_town_dataset("train", train_rows, image_px=32)
    write_town_dataset("new", [Row(0, "B2", "net-b")] * 6 + [Row(1, "C", "net-c")] * 4, image_px=32)
    write_dataset(tmp_path / "old", episodes=2, frames_per_episode=5, side=32)
    argv = ["clip", "finetune", "--data", "train", "--no-progress", "--model", micro_model, "--out", "m.pt"]
    assert cli.main([*argv, "--epochs", "1", "--batch-size", "8", "--image-size", "16"]) == 0
    capsys.readouterr()

    evaluate = ["clip", "evaluate", "--checkpoint", "m.pt", "--split", "other-towns", "--no-progress"]
    assert cli.main([*evaluate, "--data", "new", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["split"] == "other-towns" and report["frames"] == 10
    assert report["towns_overlap_training"] == [{"network": "net-b", "town": "B2", "training_town": "B"}]
    assert "warning: 1 road network(s) of --data are also in the model's training data (B2)" in captured.err
    assert {town: row["frames"] for town, row in report["per_town"].items()} == {"B2": 6, "C": 4}
    assert set(report["per_town"]["C"]) == set(report) - {
        "per_town", "scope", "objective", "context", "image_input", "split", "towns_overlap_training"
    }

    assert cli.main([*evaluate, "--data", "new"]) == 0
    table = capsys.readouterr().out
    assert "per town (frames, AUC, top-1, argmax in N(a), model AUC, prior AUC, lift, shuffled AUC)" in table
    assert "road networks also in the training data: B2" in table

    assert cli.main([*evaluate, "--data", "old", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["towns_overlap_training"] is None and "per_town" not in report and report["frames"] == 10
    assert "cannot check that --data old is held out by town: the road networks of --data" in captured.err


def test_max_minutes_alone_is_the_stopping_rule_and_the_summary_says_so(data, capsys, micro_model):
    argv = [*FINETUNE, "--model", micro_model, "--out", "m.pt", "--batch-size", "8", "--image-size", "16"]
    assert cli.main([*argv, "--max-minutes", "0.001"]) == 0
    assert "stopped by --max-minutes 0.001: " in capsys.readouterr().out


def test_finetune_then_probe_then_ladder(data, capsys, micro_model):
    small = ["--batch-size", "8", "--image-size", "16", "--epochs", "1"]
    assert cli.main([*FINETUNE, "--model", micro_model, "--out", "m.pt", *small]) == 0
    capsys.readouterr()

    assert cli.main([*PROBE, "--model", micro_model, "--out", "p.pt", "--same-split-as", "m.pt", *small, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scope"].startswith("held-out episodes (1 of 4") and report["run"]["stopped_by"] == "--epochs 1"
    for key in ("model_auc", "prior_auc", "auc_lift", "shuffled_auc", "top1"):
        assert 0.0 <= abs(report[key]) <= 1.0, key
    assert report["auc"] == report["model_auc"]  # the probe serves p(a | image, context) itself

    assert cli.main([*LADDER, "--checkpoint", "m.pt", "--probe", "p.pt", "--json"]) == 0
    ladder = json.loads(capsys.readouterr().out)
    names = [rung["name"] for rung in ladder["rungs"]]
    assert names == ["(a) probe", "(b) CLIP model", "(c) served bonus", "(c) learner's bonus"]
    assert ladder["rungs"][0]["auc"] == pytest.approx(report["model_auc"])
    assert len({rung["prior_auc"] for rung in ladder["rungs"]}) == 1
    assert cli.main([*LADDER, "--checkpoint", "m.pt", "--probe", "p.pt"]) == 0
    table = capsys.readouterr().out
    assert "diagnostic ladder on data: held-out episodes (1 of 4, 12 frames)" in table
    assert "(c) learner's bonus" in table

    # a probe of another split, or no probe file at all, is refused naming the files
    assert cli.main([*PROBE, "--model", micro_model, "--out", "q.pt", *small, "--val-fraction", "0.5"]) == 0
    capsys.readouterr()
    for probe, message in [
        ("q.pt", "--probe q.pt and --checkpoint m.pt hold out different episodes; train the probe with --same-split"),
        ("missing.pt", "--probe missing.pt does not exist"),
        ("exists.pt", "--probe exists.pt: cannot be read as a torch file"),
        ("m.pt", "--probe m.pt: not a `found-rl clip probe --out` file"),
    ]:
        code, err = run_cli([*LADDER, "--checkpoint", "m.pt", "--probe", probe], capsys)
        assert code == 2 and message in err, err


def test_train_text_tower_is_recorded_and_a_resume_must_repeat_it(data, capsys, micro_model):
    from vlm_server.clip_checkpoint import read_checkpoint

    argv = [*FINETUNE, "--model", micro_model, "--out", "m.pt", "--batch-size", "8", "--image-size", "16"]
    argv += ["--epochs", "1"]
    assert cli.main([*argv, "--train-text-tower"]) == 0
    assert read_checkpoint(data / "m.pt").training["config"]["train_text_tower"] is True
    code, err = run_cli([*argv, "--resume"], capsys)
    assert code == 2
    assert "trained with train_text_tower=True, this run has False (pass --train-text-tower to continue it)" in err
