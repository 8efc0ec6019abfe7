"""``found-rl bench guidance``: the report arithmetic, the variants, and bad input."""

import json
from pathlib import Path

import pytest

from found_rl import cli
from found_rl.bench.guidance import summarise, variant_overrides, verdict


def rows(*points, coverage=None):
    extra = {} if coverage is None else {"budget_coverage": coverage}
    return [{"env_steps": s, "route_completion": rc, "driving_score": rc / 2, **extra} for s, rc in points]


def test_steps_to_threshold_use_the_mean_over_seeds():
    # seed 0 passes 0.8 at 2000, seed 1 only at 3000: the mean first reaches 0.8 at 3000
    guided = summarise("guided", [rows((0, 0.0), (1000, 0.5), (2000, 0.9), (3000, 0.9)),
                                  rows((0, 0.0), (1000, 0.3), (2000, 0.6), (3000, 0.8))])
    assert guided.steps_to_rc80 == 3000 and guided.rc_min[2] == 0.6 and guided.rc_max[2] == 0.9
    assert guided.final_rc == pytest.approx(0.85) and guided.final_ds == pytest.approx(0.425)
    plain = summarise("plain", [rows((0, 0.0), (3000, 0.7)), rows((0, 0.1), (3000, 0.79))])
    assert plain.steps_to_rc80 is None  # never reached: "not reached"
    report = verdict({"plain": plain, "guided": guided}, budget=3000, references={})
    assert report["steps_to_rc80_plain"] == 3000 and report["steps_to_rc80_guided"] == 3000
    # plain never reaching 0.8 counts as the budget (issue 25): guided at the budget is not twice as fast
    assert not report["guided_target_met"]
    early = summarise("guided", [rows((0, 0.0), (1000, 0.9), (3000, 0.9))])
    assert verdict({"plain": plain, "guided": early}, budget=3000, references={})["guided_target_met"]


def test_marks_are_those_every_seed_evaluated_at():
    summary = summarise("x", [rows((0, 0.1), (500, 0.2), (1000, 0.3)), rows((0, 0.1), (1000, 0.5))])
    assert summary.marks == [0, 1000] and summary.rc_mean == pytest.approx([0.1, 0.4])


def test_the_noisy_target_allows_five_points():
    plain = summarise("plain", [rows((0, 0.0), (100, 0.60))])
    noisy = summarise("noisy", [rows((0, 0.0), (100, 0.56), coverage=1.0)])
    assert verdict({"plain": plain, "noisy": noisy}, 100, {})["noisy_target_met"]
    worse = summarise("noisy", [rows((0, 0.0), (100, 0.54), coverage=1.0)])
    assert verdict({"plain": plain, "noisy": worse}, 100, {})["noisy_target_met"] is False


def test_guided_variants_must_end_above_constant_throttle_on_both_scores():
    throttle = {"throttle": {"route_completion": 0.45, "driving_score": 0.30}}
    good = summarise("guided", [rows((0, 0.0), (100, 0.9))])  # DS 0.45
    weak = summarise("noisy", [rows((0, 0.0), (100, 0.5))])  # RC above, DS 0.25 below
    report = verdict({"guided": good, "noisy": weak}, 100, throttle)
    assert report["above_throttle"] == {"guided": True, "noisy": False}
    assert not report["above_throttle_target_met"]
    assert report["eval_town_unseen"] is False and report["seeds"] == 1  # rows without the flag: seen


def test_a_seen_town_is_reported_with_what_drove_it():
    seen = {"route_completion": 0.9, "driving_score": 0.9, "unseen": False, "seen_by": ["advisor data: grid"]}
    summary = summarise("guided", [[{**row, "towns": {"grid (seen)": seen}} for row in rows((0, 0.0), (100, 0.9))]])
    assert verdict({"guided": summary}, 100, {})["towns"] == {"grid (seen)": "seen: advisor data: grid"}


def test_variants_turn_into_run_config_overrides():
    assert "advisor=none" in variant_overrides("plain", 0, None)
    noisy = variant_overrides("noisy", 2, None)
    options = json.loads(next(p for p in noisy if p.startswith("advisor.spawn_options=")).split("=", 1)[1])
    assert options == {"noise_std": 0.5, "random_fraction": 0.2, "noise_seed": 2}


def test_the_vlm_variant_serves_the_model_folder_with_images_and_nothing_privileged(tmp_path):
    from found_rl.train.config import load_run_config
    from found_rl.train.loop import Trainer

    overrides = variant_overrides("vlm", 0, None, tmp_path / "model")
    assert "advisor.spawn=hf" in overrides
    options = json.loads(next(p for p in overrides if p.startswith("advisor.spawn_options=")).split("=", 1)[1])
    assert options["model"] == str((tmp_path / "model").resolve())
    from pathlib import Path

    quickstart = Path(__file__).resolve().parents[3] / "scenarios" / "quickstart.yaml"
    config = load_run_config(quickstart, overrides)
    assert config.guidance.vmr.enabled and config.guidance.awag.enabled
    assert config.guidance.awag.loss == "log_prob"  # an imperfect teacher, imitated by likelihood
    trainer = Trainer(config, tmp_path / "run", show_progress=False)
    wants = trainer._wants()
    assert wants.actions and wants.image and not wants.clip  # the VLM reads the BEV image
    assert wants.state == "prompt"  # and the prompt's fields, not the expert's privileged state
    with pytest.raises(ValueError, match="needs --vlm-model"):
        variant_overrides("vlm", 0, None)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--variants", "plain,bogus"], "unknown variant 'bogus'; allowed: plain, guided"),
        (["--variants", "clip"], "needs --clip-checkpoint"),
        (["--budget", "500", "--eval-every", "1000"], "too small to evaluate even once"),
    ],
)
def test_bad_input_is_refused_before_any_run_starts(tmp_path, capsys, argv, expected):
    code = cli.main(["bench", "guidance", "--out", str(tmp_path / "out"), *argv])
    assert code == 2 and expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- run folders as the loop writes them
BUDGET, EVERY = 4000, 1000
QUICKSTART_SUITE = Path(__file__).resolve().parents[3] / "scenarios" / "suites" / "unseen_towns.yaml"
FLAGS = ["--budget", str(BUDGET), "--eval-every", str(EVERY), "--json"]


def write_run(out, variant, seed, rcs, *, marks=None, finished=True, coverage=1.0, overrides=()):
    """A run folder of ``bench guidance``: config.yaml through RunFolder, one row per mark with every
    field the loop writes, a checkpoint, and ``finished.json`` when it used up its budget."""
    from found_rl.bench.guidance import QUICKSTART
    from found_rl.train.config import load_run_config
    from found_rl.train.run_folder import RunFolder

    folder = RunFolder(out / f"{variant}-s{seed}")
    folder.create(load_run_config(QUICKSTART, [
        f"budget.env_steps={BUDGET}", "budget.wall_time_s=null", f"evaluation.every_env_steps={EVERY}",
        f"seed={seed}", *variant_overrides(variant, seed, out / "clip.pt"), *overrides]))
    marks = marks or [EVERY * i for i in range(len(rcs))]
    append_rows(folder, variant, seed, marks, rcs, coverage)
    folder.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    folder.checkpoint.write_bytes(b"checkpoint")
    folder.final_policy.write_bytes(b"policy")  # written by a stopped run too
    if finished:
        finish(folder, marks[-1])
    return folder


def append_rows(folder, variant, seed, marks, rcs, coverage=1.0):
    from found_rl.train.run_folder import append_jsonl

    for mark, rc in zip(marks, rcs):
        steps = mark + seed % 3  # each seed reaches a mark at its own count
        row = {"mark": mark, "env_steps": steps, "updates": steps // 4, "wall_s": steps / 40}
        if variant != "plain":
            row |= {"label_coverage": 0.5 * coverage, "label_latency_steps": 4.0, "label_rate": 0.5,
                    "budget_coverage": coverage, "repeatable": True, "not_repeatable_from": None}
        scores = {"route_completion": rc, "driving_score": rc / 2, "infraction_penalty": 0.5}
        row |= {**scores, "eval_town_unseen": True, "results": str(folder.evaluations / "eval.json"), "video": None,
                "towns": {"heldout_town": {**scores, "unseen": True, "routes": 3, "results": "x.json"}}, "seen": None}
        append_jsonl(folder.evaluations_jsonl, row)


def finish(folder, steps):
    folder.write_finished({"reached": "env_steps", "env_steps": steps, "updates": steps // 4, "wall_s": steps / 40,
                           "budget": {"env_steps": BUDGET, "wall_time_s": None}})


def bench(capsys, out, *argv):
    code = cli.main(["bench", "guidance", "--out", str(out), *FLAGS, *argv])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else captured.err)


def test_an_interrupted_run_is_not_counted_but_resumed_and_unequal_seeds_are_refused(tmp_path, capsys, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from found_rl.bench import guidance

    out = tmp_path / "out"
    for seed in (0, 1):
        write_run(out, "plain", seed, [0.0, 0.2, 0.4, 0.5, 0.6])
    write_run(out, "guided", 0, [0.0, 0.5, 0.85, 0.9, 0.9], overrides=["advisor.label_rate=0.25"])
    interrupted = write_run(out, "guided", 1, [0.0, 0.4], finished=False)  # Ctrl-C at 1,000 env steps
    assert interrupted.final_policy.exists() and interrupted.finished_record() is None  # what counted before

    code, err = bench(capsys, out, "--variants", "plain,guided", "--seeds", "2", "--report-only")
    assert code == 2 and "unequal numbers of finished seeds (plain 2, guided 1)" in err
    assert "--allow-unequal-seeds" in err
    code, flagged = bench(capsys, out, "--variants", "plain,guided", "--seeds", "2", "--report-only",
                          "--allow-unequal-seeds")
    assert code == 0 and flagged["unequal_seeds"] == {"plain": 2, "guided": 1}
    assert flagged["not_finished"] == [str(interrupted.root)] and len(flagged["runs"]) == 3

    commands = []

    def train(command, stdout, stderr):  # `found-rl train --resume` finishing the run
        commands.append(command)
        append_rows(interrupted, "guided", 1, [2000, 3000, 4000], [0.8, 0.9, 0.9])
        finish(interrupted, BUDGET)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(guidance, "subprocess", SimpleNamespace(run=train, STDOUT=subprocess.STDOUT))
    code, report = bench(capsys, out, "--variants", "plain,guided", "--seeds", "2", "--no-final-suite")
    assert code == 0, report
    assert len(commands) == 1 and commands[0][commands[0].index("--resume") + 1] == str(interrupted.root)
    assert report["seeds_per_variant"] == {"plain": 2, "guided": 2} and report["unequal_seeds"] is None
    assert report["not_finished"] == [] and all(run["finished"] for run in report["runs"])
    assert report["marks"] == [0, 1000, 2000, 3000, 4000] and report["budget"] == BUDGET
    assert report["steps_to_rc80_guided"] == 2000 and report["steps_to_rc80_plain"] == BUDGET
    assert report["guided_target_met"]
    assert report["towns"] == {"heldout_town": "unseen"}  # the report says which town was unseen
    runs = {Path(run["run_dir"]).name: run for run in report["runs"]}
    # what the report says about a run comes from its own config.yaml, not the benchmark's flags
    assert runs["guided-s0"]["label_rate"] == 0.25 and runs["guided-s1"]["label_rate"] == "auto"
    assert runs["guided-s1"]["seed"] == 1 and runs["guided-s1"]["advisor"] == "expert"
    assert runs["plain-s0"]["advisor"] is None and runs["guided-s0"]["budget_coverage"] == 1.0
    assert runs["guided-s0"]["repeatable"] and runs["guided-s0"]["not_repeatable_from"] is None


def test_the_runs_table_says_what_each_run_asked_its_advisor_for(tmp_path, capsys):
    from found_rl.bench.guidance import _print_report, build_report

    out = tmp_path / "out"
    for variant in ("plain", "guided", "clip"):
        write_run(out, variant, 0, [0.0, 0.3, 0.5, 0.6, 0.6])
    report = build_report(out, [("plain", 0), ("guided", 0), ("clip", 0)])
    asked = {Path(run["run_dir"]).name: (run["advisor"], list(run["asked"])) for run in report["runs"]}
    # the clip variant's server is the expert's, but only its CLIP scores reach the learner
    assert asked == {"plain-s0": (None, []), "guided-s0": ("expert", ["actions"]),
                     "clip-s0": ("expert", ["CLIP bonus"])}
    _print_report(report)
    printed = capsys.readouterr().out
    assert "expert: CLIP bonus" in printed and "expert: actions" in printed


def test_every_variant_is_reported_at_the_marks_every_run_reached(tmp_path):
    from found_rl.bench.guidance import build_report

    out = tmp_path / "out"
    write_run(out, "plain", 0, [0.0, 0.2, 0.4, 0.5, 0.6])
    write_run(out, "plain", 1, [0.0, 0.5, 0.7], marks=[0, 2000, 4000])
    write_run(out, "guided", 0, [0.0, 0.5, 0.85, 0.9], marks=[0, 1000, 2000, 4000])
    write_run(out, "guided", 1, [0.0, 0.9, 0.9, 0.9], marks=[0, 2000, 3000, 4000])
    report = build_report(out, [("plain", 0), ("plain", 1), ("guided", 0), ("guided", 1)])
    assert report["marks"] == [0, 2000, 4000]
    assert all(v["marks"] == [0, 2000, 4000] for v in report["variants"].values())
    assert report["variants"]["plain"]["rc_mean"] == pytest.approx([0.0, 0.45, 0.65])
    assert report["variants"]["guided"]["rc_mean"] == pytest.approx([0.0, 0.875, 0.9])


@pytest.mark.parametrize(("coverage", "met", "says"), [
    (0.95, True, "met"),
    (0.3, None, "no verdict: the advisor did not answer (coverage 0.30)"),
])
def test_the_noisy_verdict_needs_the_advisor_to_have_answered(tmp_path, capsys, coverage, met, says):
    from found_rl.bench.guidance import NOISY_COVERAGE_BOUND, _print_report, build_report

    out = tmp_path / "out"
    write_run(out, "plain", 0, [0.0, 0.3, 0.5, 0.6, 0.6])
    write_run(out, "noisy", 0, [0.0, 0.3, 0.5, 0.6, 0.6], coverage=coverage)
    report = build_report(out, [("plain", 0), ("noisy", 0)])
    assert report["noisy_target_met"] is met and report["noisy_verdict"] == says
    assert report["noisy_coverage_bound"] == NOISY_COVERAGE_BOUND == 0.9
    assert report["noisy_budget_coverage"] == coverage
    _print_report(report)
    assert f"noisy_verdict: {says}" in capsys.readouterr().out


def test_failed_child_runs_are_reported_as_such_with_folder_exit_code_and_log(tmp_path, capsys, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from found_rl.bench import guidance

    out = tmp_path / "out"
    codes = {"plain-s0": 1, "plain-s1": -9, "guided-s0": 0, "guided-s1": 2}

    def train(command, stdout, stderr):  # no child writes finished.json: none used up its budget
        name = Path(command[command.index("--run-dir") + 1]).name
        stdout.write(f"{name}: what the child printed\n")
        return subprocess.CompletedProcess(command, codes[name])

    monkeypatch.setattr(guidance, "subprocess", SimpleNamespace(run=train, STDOUT=subprocess.STDOUT))
    code, err = bench(capsys, out, "--variants", "plain,guided", "--seeds", "2")
    assert code == 4, err
    assert "Traceback" not in err and "bug in found-rl" not in err
    assert "bench guidance: 4 run(s) failed or did not finish" in err
    for name, ended in [("plain-s0", "exited 1"), ("plain-s1", "killed by signal 9"), ("guided-s1", "exited 2"),
                        ("guided-s0", "exited 0 (it stopped before using up its budget: no finished.json)")]:
        log = out / f"{name}.log"
        assert f"{name}: {ended}; run folder {out / name}, log {log}" in err, err
        assert log.read_text() == f"{name}: what the child printed\n"


def test_a_child_stopped_by_ctrl_c_is_reported_as_interrupted_not_failed_and_the_bench_exits_130(
    tmp_path, capsys, monkeypatch
):
    import subprocess
    from types import SimpleNamespace

    from found_rl.bench import guidance

    out = tmp_path / "out"
    codes = {"plain-s0": 130, "plain-s1": -2, "guided-s0": 130, "guided-s1": 1}  # -2: died of SIGINT

    def train(command, stdout, stderr):
        return subprocess.CompletedProcess(command, codes[Path(command[command.index("--run-dir") + 1]).name])

    monkeypatch.setattr(guidance, "subprocess", SimpleNamespace(run=train, STDOUT=subprocess.STDOUT))
    code, err = bench(capsys, out, "--variants", "plain,guided", "--seeds", "2")
    assert code == 130, err
    assert "Traceback" not in err and "bug in found-rl" not in err and "failed" not in err
    assert "bench guidance: interrupted; 4 run(s) did not finish (the same command resumes them)" in err
    for name in ("plain-s0", "plain-s1", "guided-s0"):
        assert f"{name}: interrupted (Ctrl-C); run folder {out / name}, log {out / f'{name}.log'}" in err, err
    assert f"guided-s1: exited 1; run folder {out / 'guided-s1'}" in err  # beside them, named as it ended


def test_ctrl_c_in_the_bench_starts_no_queued_run(tmp_path, capsys, monkeypatch, python_ctrl_c):
    import signal
    import subprocess
    import threading
    import time
    from types import SimpleNamespace

    from found_rl.bench import guidance

    started = []

    def train(command, stdout, stderr):  # Ctrl-C reaches the bench while its first child still runs
        started.append(command)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(0.5)  # the child's own shutdown
        return subprocess.CompletedProcess(command, 130)

    monkeypatch.setattr(guidance, "subprocess", SimpleNamespace(run=train, STDOUT=subprocess.STDOUT))
    code, err = bench(capsys, tmp_path / "out", "--variants", "plain,guided", "--seeds", "2", "--jobs", "1")
    # Where the signal lands first (the wait or the child's result) decides whether the bench
    # lists the unfinished runs; either way it exits 130 as interrupted, with no traceback.
    assert code == 130 and "interrupted" in err.splitlines()[0] and "Traceback" not in err
    assert len(started) == 1


def test_each_finished_policy_and_constant_throttle_are_driven_on_every_suite_route_once(
    tmp_path, capsys, monkeypatch
):
    import subprocess
    from types import SimpleNamespace

    from found_rl.bench import guidance_suite

    out = tmp_path / "out"
    plain = write_run(out, "plain", 0, [0.0, 0.2, 0.4, 0.5, 0.6])
    guided = write_run(out, "guided", 0, [0.0, 0.5, 0.85, 0.9, 0.9])
    write_run(out, "guided", 1, [0.0, 0.4], finished=False)  # stopped: its policy is no final one
    scores = {f"checkpoint:{plain.final_policy}": 0.3, f"checkpoint:{guided.final_policy}": 0.7, "throttle": 0.4}
    commands = []

    def evaluate(command, stdout, stderr):  # `found-rl eval --suite` writing its suite.json
        commands.append(command)
        rc = scores[command[command.index("--agent") + 1]]
        suite_json = Path(command[command.index("--out") + 1]) / "suite.json"
        suite_json.parent.mkdir(parents=True)
        suite_json.write_text(json.dumps({"suite": {"route_completion": {"mean": rc}, "driving_score": {"mean": rc / 2},
                                                    "routes": 42}}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(guidance_suite, "subprocess", SimpleNamespace(run=evaluate, STDOUT=subprocess.STDOUT))
    code, report = bench(capsys, out, "--variants", "plain,guided", "--seeds", "1")
    assert code == 0, report
    suite = str(QUICKSTART_SUITE)
    driven = [tuple(c[c.index(flag) + 1] for flag in ("--agent", "--suite", "--repetitions")) for c in commands]
    assert driven == [(f"checkpoint:{plain.final_policy}", suite, "1"),
                      (f"checkpoint:{guided.final_policy}", suite, "1"), ("throttle", suite, "1")]
    assert report["all_routes_rc_guided"] == 0.7 and report["all_routes_ds_plain"] == 0.15
    assert report["variants"]["guided"]["all_routes"]["routes"] == 42
    assert report["throttle_all_routes"] == {"route_completion": 0.4, "driving_score": 0.2, "routes": 42}
    assert {Path(r["run_dir"]).name: r["final_suite"]["route_completion"] for r in report["runs"]} == {
        "plain-s0": 0.3, "guided-s0": 0.7}

    code, _ = bench(capsys, out, "--variants", "plain,guided", "--seeds", "1")
    assert code == 0 and len(commands) == 3  # what was driven once is not driven again


def test_a_failed_all_routes_evaluation_is_a_failed_child_named_with_its_log(tmp_path, capsys, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from found_rl.bench import guidance_suite

    out = tmp_path / "out"
    write_run(out, "plain", 0, [0.0, 0.2, 0.4, 0.5, 0.6])

    def evaluate(command, stdout, stderr):  # exits 0 without writing suite.json, then 1
        return subprocess.CompletedProcess(command, 0 if "throttle" in command else 1)

    monkeypatch.setattr(guidance_suite, "subprocess", SimpleNamespace(run=evaluate, STDOUT=subprocess.STDOUT))
    code, err = bench(capsys, out, "--variants", "plain", "--seeds", "1")
    assert code == 4 and "Traceback" not in err
    log = out / "plain-s0.final_suite.log"
    assert f"plain-s0 on every suite route: exited 1; run folder {out / 'plain-s0'}, log {log}" in err
    assert "constant throttle on every suite route: exited 0 (it wrote no suite.json)" in err

