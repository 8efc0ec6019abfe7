"""``found-rl train`` on bad input: exit 2 with one message naming the file, field or flag, and
nothing already written is touched. Interrupts end with a checkpoint and exit code 130."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from found_rl import cli
from found_rl.train.server import SpawnedServer

from .conftest import DATA, tiny_run_config, train_command


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def write(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"learner": {"batch_sise": 64}}, r"run\.yaml: learner\.batch_sise: unknown field"),
        ({"sampler": {"clips": "four"}}, r"run\.yaml: sampler\.clips: .*got 'four'"),
        ({"algorithm": "dqn"}, r"run\.yaml: algorithm: .*'sac', 'drqv2' or 'ppo'"),
        ({"budget": {"env_steps": None, "wall_time_s": None}}, r"run\.yaml: budget: .*env_steps or wall_time_s"),
        ({"guidance": {"vmr": {"decay_start_steps": 10, "decay_end_steps": 5}}}, r"guidance\.vmr: .*decay_end_steps"),
        ({"advisor": {"urls": ["localhost:8470"]}}, r"advisor: .*must start with http"),
        ({"sampler": {"executor": "inprocess", "clips": 2}}, r"sampler: .*one simulation per process"),
        ({"algorithm": "ppo", "advisor": "spawn:expert", "guidance": {"vmr": {"enabled": True}}},
         r"guidance\.vmr: ppo does not accept it \(VMR .*Q-learning critic\); ppo accepts: clip_bonus, advisor_bc"),
        ({"algorithm": "drqv2", "advisor": "spawn:expert", "guidance": {"awag": {"enabled": True, "detach_std": True}}},
         r"guidance\.awag\.detach_std: drqv2 does not accept it \(its std is a schedule, not learned\); set false"),
        ({"advisor": "spawn:expert", "guidance": {"awag": {"enabled": True, "loss": "mse"}}},
         r"guidance\.awag\.loss: .*'log_prob' or 'mode_mse'"),
        ({"advisor": "spawn:expert", "guidance": {"vmr": {"enabled": True, "margin_distance": -1}}},
         r"guidance\.vmr\.margin_distance: "),
        ({"guidance": {"awag": {"enabled": True}}}, r"guidance\.awag: needs advisor labels"),
        ({"advisor": "spawn:expert"}, r"advisor: is set, but no guidance term uses its answers"),
        ({"learner": {"gamma": float("nan")}}, r"learner\.gamma: .*finite"),
        ({"advisor": {"spawn": "expert", "label_rate": 0}}, r"advisor\.label_rate: .*\(0, 1\] or 'auto', got 0"),
        ({"advisor": {"spawn": "expert", "label_rate": 1.5}}, r"advisor\.label_rate: .*got 1\.5"),
        ({"advisor": {"spawn": "expert", "label_rate": "half"}}, r"advisor\.label_rate: .*got 'half'"),
        ({"algorithm": "ppo", "sampler": {"overlap": True}}, r"sampler\.overlap: ppo is on-policy"),
        ({"resources": {"worker_nice": -5}}, r"resources\.worker_nice: "),
        ({"advisor": {"spawn": "expert", "when_down": "wait"}}, r"advisor\.when_down: .*'continue' or 'stop'"),
    ],
)
def test_config_mistakes_name_the_file_and_field(tmp_path, capsys, change, expected):
    config = write(tmp_path / "run.yaml", tiny_run_config(**change))
    code, err = run_cli(["train", str(config), "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 2 and re.search(expected, err), err
    assert not (tmp_path / "run").exists()


def test_a_scenario_that_does_not_load_is_named_before_anything_starts(tmp_path, capsys):
    scenario = tmp_path / "town.yaml"
    scenario.write_text((DATA / "tiny_random.yaml").read_text().replace("vehicles: 3", "vehicles: -3"))
    code, err = run_cli(["train", str(scenario)], capsys)
    assert code == 2 and "town.yaml: traffic.vehicles" in err, err
    config = write(tmp_path / "run.yaml", tiny_run_config(scenario="missing.yaml"))
    code, err = run_cli(["train", str(config)], capsys)
    assert code == 2 and "missing.yaml" in err, err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--set", "budget.env_steps"], "expected KEY=VALUE"),
        (["--set", "budget.env_steps=[1"], "not valid YAML"),
        (["--set", "budget.wall_time_s=-5"], r"budget\.wall_time_s: .*greater than 0"),
        (["--set", "sampler.clips.x=1"], "clips is not a section"),
    ],
)
def test_set_mistakes_name_the_pair(tmp_path, capsys, argv, expected):
    config = write(tmp_path / "run.yaml", tiny_run_config())
    code, err = run_cli(["train", str(config), *argv], capsys)
    assert code == 2 and re.search(expected, err), err


def test_a_run_folder_is_never_overwritten_and_resume_refuses_other_configs(tmp_path, capsys):
    config = write(tmp_path / "run.yaml", tiny_run_config())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write(run_dir / "config.yaml", {"scenario": "x"})
    before = (run_dir / "config.yaml").read_text()
    code, err = run_cli(["train", str(config), "--run-dir", str(run_dir)], capsys)
    assert code == 2 and "already holds a run" in err and "--resume" in err
    assert (run_dir / "config.yaml").read_text() == before

    # A real stored config, then a resume with a changed learner setting: both values named.
    from found_rl.train.config import load_run_config
    from found_rl.train.run_folder import RunFolder

    other = tmp_path / "other"
    RunFolder(other).create(load_run_config(config))
    code, err = run_cli(["train", "--resume", str(other), "--set", "learner.batch_size=64"], capsys)
    assert code == 2 and "learner.batch_size: 16 in the run, 64 now" in err, err
    code, err = run_cli(["train", "--resume", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "no run here" in err


def test_a_corrupt_checkpoint_is_refused_and_left_as_it_is(tmp_path, capsys):
    from found_rl.train.config import load_run_config
    from found_rl.train.run_folder import RunFolder

    config = write(tmp_path / "run.yaml", tiny_run_config())
    folder = RunFolder(tmp_path / "run")
    folder.create(load_run_config(config))
    folder.checkpoints.mkdir()
    folder.checkpoint.write_bytes(b"PK\x03\x04 not a checkpoint")
    code, err = run_cli(["train", "--resume", str(folder.root)], capsys)
    assert code == 2 and "checkpoint.pt: cannot be read" in err, err
    assert folder.checkpoint.read_bytes() == b"PK\x03\x04 not a checkpoint"
    folder.checkpoint.unlink()
    code, err = run_cli(["train", "--resume", str(folder.root)], capsys)
    assert code == 2 and "before its first checkpoint" in err, err


def test_ctrl_c_writes_a_final_checkpoint_stops_the_spawned_server_and_exits_130(tmp_path):
    config = write(tmp_path / "run.yaml", tiny_run_config(
        budget={"env_steps": 100000},
        advisor={"spawn": "fixed-cost", "spawn_options": {"base_ms": 1.0}},
        guidance={"vmr": {"enabled": True}},
        checkpoint={"every_env_steps": 100000},
    ))
    run_dir = tmp_path / "run"
    process = subprocess.Popen(train_command(str(config), "--run-dir", str(run_dir)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not list(run_dir.glob("events.out.tfevents.*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3.0)  # a few lock-steps with labels
    os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert (run_dir / "checkpoints" / "checkpoint.pt").is_file() and (run_dir / "policy.pt").is_file()
    server_pid = int(re.search(r"advisor server \S+ started \(pid (\d+)\)", stderr).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)


def test_a_spawned_server_that_cannot_start_is_reported_with_its_log(tmp_path):
    server = SpawnedServer("no.such.module:Advisor", log_path=tmp_path / "server.log", ready_timeout_s=60)
    with pytest.raises(RuntimeError, match=r"exited with code .* its log"):
        server.start()
