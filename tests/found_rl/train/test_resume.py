"""A run killed with SIGKILL and resumed ends in the same state as one that never stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import torch

from found_rl.checkpoint import read_checkpoint

from .conftest import train_command

pytestmark = pytest.mark.xdist_group("guided_runs")  # one worker builds the module's runs once

IGNORED = {"wall_s", "evaluation_wall_s", "pending_evaluations"}
"""Wall time differs, by nature, and so does which evaluations the workers were still driving when
a checkpoint was written; their scores do not (each test compares the evaluation rows too)."""


def assert_same(a, b, path: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))} differ"
        for key in a:
            if key not in IGNORED:
                assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), f"{path}: tensors differ"
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def assert_ran_clean(done: subprocess.CompletedProcess) -> None:
    """Exit 0 with no traceback and no warning on stderr (what a user of ``found-rl train`` sees)."""
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and not re.search(r"\w*Warning\b", done.stderr), done.stderr


def final_state(run_dir):
    payload = read_checkpoint(run_dir / "checkpoints" / "checkpoint.pt")
    state = payload["training_state"]
    with np.load(run_dir / "checkpoints" / state.pop("replay_file")) as replay:
        arrays = {name: replay[name] for name in replay.files}
    return payload["policy_state"], state, arrays


def run_killed_at_first_checkpoint(command: list[str], run_dir, env=None) -> int:
    """Start ``command`` (a run with a budget it will not reach), SIGKILL it as soon as it has a
    checkpoint; returns the env steps of that checkpoint."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    checkpoint = run_dir / "checkpoints" / "checkpoint.pt"
    deadline = time.monotonic() + 240
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    return read_checkpoint(checkpoint)["metadata"]["env_steps"]


GUIDED = ("--set", "advisor.spawn=hf", "--set", "advisor.label_mode=repeatable",
          "--set", "advisor.label_lag_steps=2", "--set", "guidance.vmr.enabled=true",
          "--set", "guidance.awag.enabled=true", "--set", "evaluation.enabled=true",
          "--set", "evaluation.every_env_steps=100", "--set", "evaluation.routes=1",
          "--set", "evaluation.references=[still]", "--set", "evaluation.video=false")
"""A served advisor VLM (``vlm init --preset tiny``, nothing privileged) labels half the observations."""
WALL_CLOCK = {"wall_s", "evaluation_wall_s", "results", "video"}  # timings, and paths inside each run's own folder


def evaluation_rows(run_dir):
    from found_rl.train.run_folder import read_jsonl

    def strip(row):
        if isinstance(row, dict):
            return {k: strip(v) for k, v in row.items() if k not in WALL_CLOCK}
        return row

    return [strip(row) for row in read_jsonl(run_dir / "evaluations.jsonl")]


@pytest.fixture(scope="module")
def guided_runs(tmp_path_factory):
    """Two runs of one seed and one of another, each with a served advisor VLM in repeatable mode.

    The second run of seed 0 ("b") is killed with SIGKILL at its first checkpoint and resumed:
    it is both the same-seed twin of "a" and the killed-and-resumed run (fewer start-ups of a
    guided run, each about half a minute, for the same two comparisons). Up to its kill it is
    an independent run of the seed; after it, a resume.
    """
    import yaml

    from found_rl.vlm.scratch import init_advisor

    from .conftest import DATA, tiny_run_config

    root = tmp_path_factory.mktemp("guided")
    model = root / "vlm"
    init_advisor(model, "tiny", seed=0)
    config = root / "run.yaml"
    # episodes end at their route's time limit, which differs by route: each seed pads differently
    config.write_text(yaml.safe_dump(tiny_run_config(
        scenario=str(DATA / "tiny_timeouts.yaml"), sampler={"clips": 3, "horizon": 200}, budget={"env_steps": 200},
        advisor={"spawn_options": {"model": str(model), "torch_threads": 1}})))
    env = {**os.environ, "FOUND_RL_CACHE": os.environ.get("FOUND_RL_CACHE", str(root / "cache"))}
    # The three runs start at once: each spends most of its half minute waiting for its server to
    # load (one core's work), so side by side they take little longer than one. Each has its own
    # server, run folder and seed; nothing they compute depends on the others.
    started = {}
    # the other seed chooses its label rate by the start-up probe (recorded in its config.yaml)
    for name, seed, rate in (("a", 0, "0.5"), ("other_seed", 1, "auto")):
        command = train_command(str(config), "--run-dir", str(root / name), *GUIDED, "--set",
                                f"seed={seed}", "--set", f"advisor.label_rate={rate}")
        output = open(root / f"{name}.stdout", "w+"), open(root / f"{name}.stderr", "w+")  # noqa: SIM115
        process = subprocess.Popen(command, stdout=output[0], stderr=output[1], text=True, env=env)
        started[name] = command, process, output
    killed_dir = root / "b"
    killed_at = run_killed_at_first_checkpoint(
        train_command(str(config), "--run-dir", str(killed_dir), *GUIDED, "--set", "seed=0",
                      "--set", "advisor.label_rate=0.5", "--set", "budget.env_steps=100000"), killed_dir, env)
    # the resume starts at once, beside the two runs still going
    command = train_command("--resume", str(killed_dir), "--set", "budget.env_steps=200")
    output = open(root / "b.stdout", "w+"), open(root / "b.stderr", "w+")  # noqa: SIM115
    started["b"] = command, subprocess.Popen(command, stdout=output[0], stderr=output[1], text=True, env=env), output
    runs = {}
    for name, (command, process, (stdout, stderr)) in started.items():
        code = process.wait(timeout=400)
        with stdout, stderr:
            stdout.seek(0), stderr.seek(0)
            assert_ran_clean(subprocess.CompletedProcess(command, code, stdout.read(), stderr.read()))
        runs[name] = root / name
    return config, runs, env, killed_at


@pytest.mark.timeout(900)
def test_two_runs_of_one_seed_with_the_served_advisor_end_identical(guided_runs):
    _, runs, _, _ = guided_runs
    policy_a, state_a, replay_a = final_state(runs["a"])
    policy_b, state_b, replay_b = final_state(runs["b"])
    labelled = replay_a["has_advisor"][replay_a["is_transition"]].mean()
    assert 0.2 < labelled < 0.8  # the advisor labelled about half the transitions: its budget
    assert_same(policy_a, policy_b, "policy")
    assert_same(state_a, state_b, "training_state")
    assert_same(replay_a, replay_b, "replay")
    assert evaluation_rows(runs["a"]) == evaluation_rows(runs["b"])


@pytest.mark.timeout(900)
def test_a_killed_guided_run_resumes_to_the_uninterrupted_one(guided_runs):
    """Run "b" of the fixture was killed at its first checkpoint, well before the end, and resumed."""
    _, runs, _, killed_at = guided_runs
    assert 0 < killed_at < 200
    policy_a, state_a, replay_a = final_state(runs["a"])
    policy_b, state_b, replay_b = final_state(runs["b"])
    assert state_a["counters"]["env_steps"] == state_b["counters"]["env_steps"] >= 200
    assert_same(policy_a, policy_b, "policy")
    assert_same(state_a, state_b, "training_state")
    assert_same(replay_a, replay_b, "replay")
    assert evaluation_rows(runs["a"]) == evaluation_rows(runs["b"])
    for state, run in ((state_a, runs["a"]), (state_b, runs["b"])):  # still driven at the last checkpoint, then scored
        marks = {row["mark"] for row in evaluation_rows(run)}
        assert {item["row"]["mark"] for item in state["pending_evaluations"]} <= marks


def test_a_run_with_an_auto_label_rate_records_the_rate_its_probe_chose_and_resumes_with_it(guided_runs):
    import json

    import yaml

    from found_rl.train.config import load_run_config
    from found_rl.train.run_folder import RunFolder

    config, runs, _, _ = guided_runs
    folder = RunFolder(runs["other_seed"])
    recorded = yaml.safe_load(folder.config.read_text())["advisor"]["label_rate"]
    probe = json.loads(folder.label_probe.read_text())
    assert isinstance(recorded, float) and 0 < recorded <= 1 and probe["label_rate"] == recorded
    assert probe["answers_per_s"] > 0
    rows = evaluation_rows(runs["other_seed"])
    assert rows[-1]["label_rate"] == recorded and rows[-1]["repeatable"] is True
    asked_again = load_run_config(config, [*GUIDED[1::2], "seed=1", "advisor.label_rate=auto"])
    assert folder.resumed_config(asked_again).advisor.label_rate == recorded  # no new probe on resume


def test_a_resume_that_changes_the_label_mode_is_refused_naming_the_key(guided_runs):
    _, runs, env, _ = guided_runs
    refused = subprocess.run(train_command("--resume", str(runs["a"]), "--set", "advisor.label_mode=async"),
                             capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode == 2 and "advisor.label_mode: 'repeatable' in the run, 'async' now" in refused.stderr


def test_curves_of_two_seeds_align_on_their_marks_not_their_step_counts(guided_runs):
    from found_rl.bench.guidance import summarise
    from found_rl.train.curves import load_curves
    from found_rl.train.run_folder import read_jsonl

    _, runs, _, _ = guided_runs
    rows = [read_jsonl(runs[name] / "evaluations.jsonl") for name in ("a", "other_seed")]
    assert [r["mark"] for r in rows[0]] == [r["mark"] for r in rows[1]] == [0, 100, 200]
    steps = [[r["env_steps"] for r in run] for run in rows]
    assert steps[0] != steps[1]  # FAST's lock-steps crossed the marks at different counts ...
    summary = summarise("guided", rows)
    assert summary.marks == [0, 100, 200] and summary.seeds == 2  # ... yet every mark is shared
    group = load_curves([f"g={runs['a']}", f"g={runs['other_seed']}"])["g"]
    marks, values = group.aligned("route_completion")
    assert marks.tolist() == [0, 100, 200] and values.shape == (2, 3)
    assert summary.eval_town_unseen is False  # a single town: the evaluation routes were seen
    # the verdict on these real rows: a never-reached threshold counts as the budget, and the
    # flags follow the runs' own references
    import json

    from found_rl.bench.guidance import verdict

    references = json.loads((runs["a"] / "references.json").read_text())
    report = verdict({"guided": summary}, budget=200, references=references)
    reached = summary.steps_to_rc80
    assert report["steps_to_rc80_guided"] == (200 if reached is None else reached)
    assert report["seeds"] == 2 and report["eval_town_unseen"] is False
    assert set(references) == {"still"} and "above_throttle" not in report  # no throttle reference ran
    assert report["final_rc_guided"] == pytest.approx(np.mean([run[-1]["route_completion"] for run in rows]))
