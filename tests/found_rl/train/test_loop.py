"""A whole tiny training run: what lands in the run folder and in TensorBoard."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest
import torch
import yaml

from found_rl.checkpoint import load_policy, read_checkpoint
from found_rl.models.observation import ObsSpec
from found_rl.models.policy import PolicySpec
from found_rl.state_vector import STATE_SIZE
from found_rl.storage.replay import ReplayBuffer
from found_rl.train import tags
from found_rl.train.checkpointing import save_run_checkpoint
from found_rl.train.run_folder import read_jsonl

from .conftest import tiny_run_config

pytestmark = pytest.mark.xdist_group("finished_run")  # one worker builds the module's runs once


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from found_rl.train.config import validate_run_config
    from found_rl.train.loop import Trainer

    root = tmp_path_factory.mktemp("run")
    config = validate_run_config(tiny_run_config(
        budget={"env_steps": 240},
        advisor={"spawn": "fixed-cost", "spawn_options": {"base_ms": 1.0}, "label_rate": 1.0},
        guidance={"vmr": {"enabled": True}, "awag": {"enabled": True}},
        evaluation={"enabled": True, "every_env_steps": 10_000, "routes": 1, "references": ["still"]},
    ), "test", root)
    result = Trainer(config, root / "run", show_progress=False).run()
    return root / "run", result


def test_the_run_folder_holds_config_evaluations_checkpoints_and_the_final_policy(finished_run):
    run_dir, result = finished_run
    assert result.env_steps >= 240 and result.updates > 0 and not result.interrupted
    assert result.finished and json.loads((run_dir / "finished.json").read_text())["reached"] == "env_steps"
    stored = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert stored["budget"]["env_steps"] == 240 and stored["network"] == "auto"
    rows = read_jsonl(run_dir / "evaluations.jsonl")
    assert [row["env_steps"] for row in rows] == [0, result.env_steps]  # before training, and the final policy
    for row in rows:
        assert 0.0 <= row["route_completion"] <= 1.0 and 0.0 <= row["driving_score"] <= row["route_completion"]
        results = json.loads((run_dir / "evaluations" / f"eval_{row['env_steps']:010d}.json").read_text())
        assert results["entry_status"] == "Finished" and len(results["_checkpoint"]["records"]) == 1
    assert list((run_dir / "videos").glob("eval_*/0000_*.gif"))
    assert set(json.loads((run_dir / "references.json").read_text())) == {"still"}
    towns = json.loads((run_dir / "towns.json").read_text())  # the evaluation town's roads and why it is seen
    assert towns["sets"][0]["network"].startswith("roads-v1:") and towns["sets"][0]["seen_by"] == [
        "training: tiny_random.yaml"]
    assert towns["advisor_towns"] == "none: the fixed-cost advisor learned from no town"
    for row in rows:  # each score with its 95 % interval, and how long the evaluation took
        assert row["driving_score_ci"][0] <= row["driving_score"] <= row["driving_score_ci"][1]
        assert row["evaluation_wall_s"] > 0
    policy = load_policy(run_dir / "policy.pt")  # what `found-rl eval --agent checkpoint:` loads
    assert policy.spec.obs.bev_shape == (15, 48, 48)  # the cpu preset's BEV (network: auto on a CPU)
    obs = {"bev": np.zeros((15, 48, 48), np.uint8), "state": np.zeros(STATE_SIZE, np.float32)}
    assert policy.act(obs).shape == (2,)
    assert result.label_coverage > 0.5


def test_only_a_run_that_used_up_its_budget_is_recorded_finished(tmp_path):
    from found_rl.train.config import validate_run_config
    from found_rl.train.loop import Trainer
    from found_rl.train.run_folder import RunFolder

    config = validate_run_config(tiny_run_config(budget={"env_steps": 60}), "test", tmp_path)
    folder = RunFolder(tmp_path / "run")
    trainer = Trainer(config, folder.root, show_progress=False)
    trainer.stop.requested = "SIGINT"  # Ctrl-C before the first lock-step
    stopped = trainer.run()
    assert stopped.interrupted and not stopped.finished
    assert folder.final_policy.exists() and folder.finished_record() is None  # policy.pt proves nothing

    resumed = Trainer(config, folder.root, resume=True, show_progress=False).run()
    record = folder.finished_record()
    assert resumed.finished and not resumed.interrupted
    assert record["reached"] == "env_steps" and record["env_steps"] == resumed.env_steps >= 60
    assert record["budget"] == {"env_steps": 60, "wall_time_s": config.budget.wall_time_s}


def test_tensorboard_gets_the_documented_tags(finished_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = finished_run
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    expected = {*tags.EVAL_TAGS, *tags.PERF_TAGS, "guidance/advisor_up", "guidance/label_coverage_replay",
                "losses/qf_loss", "losses/actor_loss", "guidance/vmr_loss", "guidance/awag_loss"}
    assert expected <= scalars, sorted(expected - scalars)
    assert all(tag.split("/")[0] in {"charts", "losses", "guidance", "perf"} for tag in scalars)


def test_plot_draws_the_curves_of_runs(finished_run, tmp_path):
    from found_rl import cli

    run_dir, _ = finished_run
    out = tmp_path / "curve.png"
    assert cli.main(["plot", f"a={run_dir}", f"a={run_dir}", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_full_disk_while_checkpointing_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch):
    spec = PolicySpec("sac", ObsSpec(vector_dim=1), 2)
    replay = ReplayBuffer(64, ObsSpec(vector_dim=1), 2)
    path = tmp_path / "checkpoints" / "checkpoint.pt"
    save_run_checkpoint(path, spec, {"w": torch.ones(1)}, {"learner": {}, "counters": {"env_steps": 10}}, replay, 10)
    before = path.read_bytes()

    def disk_full(self, file):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ReplayBuffer, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        state = {"learner": {}, "counters": {"env_steps": 20}}
        save_run_checkpoint(path, spec, {"w": torch.zeros(1)}, state, replay, 20)
    assert path.read_bytes() == before
    state = read_checkpoint(path)["training_state"]
    assert (path.parent / state["replay_file"]).is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint.pt", state["replay_file"]]


def test_ppo_trains_on_fast_rollouts_and_its_policy_loads(tmp_path):
    from found_rl.train.config import validate_run_config
    from found_rl.train.loop import Trainer

    config = validate_run_config(tiny_run_config(
        algorithm="ppo", budget={"env_steps": 120},
        learner={"rollout_steps": 16, "update_epochs": 1, "num_minibatches": 2},
    ), "test", tmp_path)
    result = Trainer(config, tmp_path / "run", show_progress=False).run()
    assert result.updates >= 3  # 120 steps / (16 lock-steps × 2 clips), padding included
    policy = load_policy(tmp_path / "run" / "policy.pt")
    assert policy.spec.algo == "ppo"
    state = read_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint.pt")["training_state"]
    assert state["replay_file"] is None and state["counters"]["env_steps"] == result.env_steps


def test_drqv2_trains_with_guidance_and_its_policy_loads(tmp_path):
    from found_rl.train.config import validate_run_config
    from found_rl.train.loop import Trainer

    config = validate_run_config(tiny_run_config(
        algorithm="drqv2", budget={"env_steps": 120},
        advisor={"spawn": "fixed-cost", "spawn_options": {"base_ms": 1.0}, "label_rate": 1.0},
        guidance={"vmr": {"enabled": True}, "awag": {"enabled": True}},
    ), "test", tmp_path)
    trainer = Trainer(config, tmp_path / "run", show_progress=False)
    result = trainer.run()
    assert result.updates > 0 and result.label_coverage > 0.5
    assert trainer.learner.config.awag.schedule == "drqv2_cosine"  # DrQ-v2's own default kept
    assert load_policy(tmp_path / "run" / "policy.pt").spec.algo == "drqv2"


def test_episodes_cut_by_global_truncation_are_charted_too(finished_run):
    """Charting only self-ended episodes reads training RC low (survivorship): every end counts."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = finished_run
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    cut = [event.value for event in events.Scalars(tags.EPISODE_CUT_BY_FAST)]
    # the tiny run's episodes (60-step horizon, 150-step env limit) are all cut by FAST: before
    # issue 25 none of them reached the charts
    assert cut and set(cut) <= {0.0, 1.0} and 1.0 in cut
    for tag in (tags.EPISODIC_RETURN, tags.EPISODIC_LENGTH, tags.ROUTE_COMPLETION):
        assert len(events.Scalars(tag)) == len(cut), tag
    assert all(event.value >= 1 for event in events.Scalars(tags.EPISODIC_LENGTH))


def test_torch_threads_above_the_usable_cores_warn_and_use_the_cores(monkeypatch, caplog):
    from found_rl.train import loop

    monkeypatch.setattr(loop, "usable_cores", lambda: 2)
    with caplog.at_level("WARNING"):
        assert loop.torch_threads(8) == 2
    assert "torch_threads: 8 asked for, but this process may use 2 cores; using 2" in caplog.text
    caplog.clear()
    assert loop.torch_threads(0) == 1 and loop.torch_threads(1) == 1 and not caplog.text
