"""The evaluation queue: policy snapshots first, references between them, nothing blocks the loop."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from found_rl.train.evaluation_queue import EvaluationQueue, PendingEvaluation


class FakeSets:
    """Evaluation workers whose evaluations end when the test says so (``finish`` ends them at once,
    as a real wait would)."""

    num_routes = 3

    def __init__(self) -> None:
        self.built = True
        self.waited_ready = 0
        self.started: list[str] = []
        self.done = False
        self.running: str | None = None
        self.videos: list[Path | None] = []

    def start(self, agent: str, label: str, results_stem: Path, video_root: Path | None,
              identity: dict[str, Any]) -> None:
        assert self.running is None, "one evaluation at a time on the workers"
        self.running = agent
        self.started.append(agent)
        self.videos.append(video_root)
        self.done = False

    def ready(self) -> bool:
        return self.built

    def wait_ready(self) -> None:
        self.waited_ready += 1
        self.built = True

    def is_done(self) -> bool:
        return self.done

    def finish(self) -> dict[str, Any]:
        assert self.running is not None
        agent, self.running = self.running, None
        return {"route_completion": 0.5, "agent": agent}


@pytest.fixture
def queue(tmp_path: Path) -> tuple[EvaluationQueue, FakeSets, list[dict[str, Any]]]:
    sets, rows = FakeSets(), []
    made = EvaluationQueue(sets, tmp_path / "references.json", tmp_path / "evaluations", tmp_path / "videos",
                           rows.append, nullcontext)
    return made, sets, rows


def _pending(tmp_path: Path, step: int) -> PendingEvaluation:
    snapshot = tmp_path / f"policy_eval_{step}.pt"
    snapshot.write_text("weights")
    return PendingEvaluation({"mark": step, "env_steps": step}, str(snapshot))


def test_a_policy_evaluation_goes_before_the_references_and_they_follow_without_a_wait(queue, tmp_path):
    evaluations, sets, rows = queue
    evaluations.queue_references(["still", "throttle"])
    evaluations.submit(_pending(tmp_path, 0))
    assert sets.started == [f"checkpoint:{tmp_path / 'policy_eval_0.pt'}"]
    assert sets.videos == [tmp_path / "videos" / "eval_0000000000"]
    evaluations.poll()  # not done yet: nothing changes, nothing waits
    assert len(sets.started) == 1 and rows == []
    sets.done = True
    evaluations.poll()
    assert [row["mark"] for row in rows] == [0] and sets.started[-1] == "still"
    assert not (tmp_path / "policy_eval_0.pt").exists()  # the snapshot goes once its row is written
    assert rows[0]["evaluation_wall_s"] >= 0.0


def test_a_policy_submitted_while_a_reference_runs_waits_its_turn_without_blocking(queue, tmp_path):
    evaluations, sets, rows = queue
    evaluations.queue_references(["still", "throttle"])
    evaluations.poll()
    assert sets.started == ["still"]
    pending = _pending(tmp_path, 100)
    evaluations.submit(pending)  # returns at once: the reference is still running
    assert sets.started == ["still"] and evaluations.outstanding_policies == [pending]  # a checkpoint keeps it
    sets.done = True
    evaluations.poll()
    assert sets.started[-1].startswith("checkpoint:")  # the policy before the next reference
    assert json.loads((tmp_path / "references.json").read_text()) == {"still": {"route_completion": 0.5,
                                                                                "agent": "still"}}
    sets.done = True
    evaluations.poll()
    assert [row["mark"] for row in rows] == [100] and sets.started[-1] == "throttle"
    assert evaluations.outstanding_policies == []


def test_a_mark_waits_only_behind_two_outstanding_ones_and_rows_keep_mark_order(queue, tmp_path):
    evaluations, sets, rows = queue
    evaluations.submit(_pending(tmp_path, 0))
    evaluations.submit(_pending(tmp_path, 100))  # the first still runs: no wait, it queues
    assert rows == [] and len(sets.started) == 1
    assert [item.row["mark"] for item in evaluations.outstanding_policies] == [0, 100]
    evaluations.submit(_pending(tmp_path, 200))  # two outstanding: the oldest is waited for
    assert [row["mark"] for row in rows] == [0] and len(sets.started) == 2
    evaluations.drain()
    assert [row["mark"] for row in rows] == [0, 100, 200]


def test_drain_scores_every_reference_and_a_resumed_queue_skips_the_scored_ones(queue, tmp_path):
    evaluations, sets, _ = queue
    evaluations.queue_references(["still", "throttle", "still"])
    evaluations.drain()
    assert sets.started == ["still", "throttle"]
    assert set(json.loads((tmp_path / "references.json").read_text())) == {"still", "throttle"}
    resumed_sets = FakeSets()
    resumed = EvaluationQueue(resumed_sets, tmp_path / "references.json", tmp_path / "evaluations", None,
                              lambda row: None, nullcontext)
    resumed.queue_references(["still", "throttle", "expert"])
    resumed.drain()
    assert resumed_sets.started == ["expert"] and set(resumed.references) == {"still", "throttle", "expert"}
    assert resumed_sets.videos == [None]


def test_training_does_not_wait_for_the_workers_to_load_and_a_wait_for_a_result_does(queue, tmp_path):
    evaluations, sets, rows = queue
    sets.built = False
    evaluations.queue_references(["still"])
    evaluations.submit(_pending(tmp_path, 0))
    evaluations.poll()
    assert sets.started == [] and sets.waited_ready == 0  # the loop goes on while the envs load
    sets.built = True
    evaluations.poll()
    assert sets.started[0].startswith("checkpoint:")
    sets.built = False  # as if another set were still loading: finishing waits for it instead of spinning
    evaluations.finish_policy()
    assert [row["mark"] for row in rows] == [0] and sets.waited_ready == 1 and sets.started[-1] == "still"
