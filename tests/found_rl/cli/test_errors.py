"""A user's mistake prints one line and exits 2; anything else is a bug: traceback, report line, exit 1.

The other codes: something outside found-rl 3, failed child runs 4, Ctrl-C 130.
"""

from __future__ import annotations

import errno
import os

import pytest

from found_rl import cli
from found_rl.errors import (
    ChildRunsFailed,
    ChildRunsInterrupted,
    ExistingPathError,
    FailedChildRun,
    MissingPathError,
    NotAFileError,
    NotAFolderError,
    OutsideFailure,
    UserError,
    as_user_error,
)


@pytest.fixture
def failing_scenario_check(monkeypatch):
    """``found-rl scenario check`` made to raise a chosen exception."""

    def arrange(exc: Exception) -> None:
        def run(args):
            raise exc

        monkeypatch.setattr("found_rl.cli.scenario.run_check", run)

    return arrange


def test_a_user_error_is_one_line_without_traceback(failing_scenario_check, capsys):
    failing_scenario_check(UserError("x.yaml: traffic.vehicles: expected an int"))
    assert cli.main(["scenario", "check", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert err == "found-rl scenario: error: x.yaml: traffic.vehicles: expected an int\n"


@pytest.mark.parametrize("exc", [ValueError("not enough values to unpack (expected 2, got 1)"), KeyError("phase")])
def test_any_other_exception_keeps_its_traceback_and_asks_to_report_it(failing_scenario_check, capsys, exc):
    failing_scenario_check(exc)
    assert cli.main(["scenario", "check", "x.yaml"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and str(exc) in err
    assert err.rstrip().splitlines()[-1].startswith("found-rl scenario: this is a bug in found-rl")
    assert "please report it" in err


def test_a_missing_file_is_the_users_mistake(capsys, tmp_path):
    assert cli.main(["scenario", "check", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and "Traceback" not in err


def test_user_errors_are_value_errors_and_other_packages_value_errors_convert():
    assert issubclass(UserError, ValueError)
    with pytest.raises(UserError, match="bad checkpoint"), as_user_error():
        raise ValueError("bad checkpoint")
    with pytest.raises(KeyError), as_user_error():
        raise KeyError("an internal bug stays what it is")


@pytest.mark.parametrize(
    "exc",
    [
        MissingPathError("--data /d: no such folder"),
        ExistingPathError("--out /o.pt: exists; choose a new file"),
        NotAFolderError("--run-dir /r: is a file, not a folder"),
        NotAFileError("/s: is a folder; pass a scenario YAML file"),
    ],
)
def test_a_path_the_user_named_wrongly_is_one_line_and_exit_2(failing_scenario_check, capsys, exc):
    failing_scenario_check(exc)
    assert cli.main(["scenario", "check", "x.yaml"]) == 2
    assert capsys.readouterr().err == f"found-rl scenario: error: {exc}\n"


@pytest.mark.parametrize(
    "exc",
    [
        FileNotFoundError(2, "No such file or directory", "/tmp/found-rl-cache/net.pkl"),
        PermissionError(13, "Permission denied", "/var/lib/found-rl/replay.npz"),
        IsADirectoryError(21, "Is a directory", "/tmp/x"),
        FileExistsError(17, "File exists", "/tmp/y"),
    ],
)
def test_a_file_system_error_of_found_rls_own_files_is_a_bug_with_its_traceback(failing_scenario_check, capsys, exc):
    failing_scenario_check(exc)
    assert cli.main(["scenario", "check", "x.yaml"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and exc.filename in err
    assert "this is a bug in found-rl" in err


def test_the_user_path_errors_are_still_the_built_in_kinds():
    assert issubclass(MissingPathError, FileNotFoundError) and issubclass(MissingPathError, UserError)
    assert issubclass(ExistingPathError, FileExistsError) and issubclass(NotAFolderError, NotADirectoryError)
    assert issubclass(NotAFileError, IsADirectoryError)


def test_an_outside_failure_is_one_line_and_exit_3(failing_scenario_check, capsys):
    failing_scenario_check(OutsideFailure("the advisor server at http://127.0.0.1:8470 stopped answering"))
    assert cli.main(["scenario", "check", "x.yaml"]) == 3
    assert capsys.readouterr().err == (
        "found-rl scenario: stopped: the advisor server at http://127.0.0.1:8470 stopped answering\n"
    )


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_is_the_machines_state_one_line_and_exit_3(failing_scenario_check, capsys, number):
    """A write that fails on a full disk is not a bug (a training run wrote its replay buffer there)."""
    failing_scenario_check(OSError(number, os.strerror(number)))
    assert cli.main(["scenario", "check", "x.yaml"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("found-rl scenario: stopped: no space left on the device") and "--resume" in err
    assert "Traceback" not in err and "bug" not in err


def test_failed_child_runs_are_named_each_with_folder_exit_code_and_log_and_exit_4(
    failing_scenario_check, capsys, tmp_path
):
    failing_scenario_check(ChildRunsFailed("bench guidance", [
        FailedChildRun("guided-s0", tmp_path / "guided-s0", 1, tmp_path / "guided-s0.log"),
        FailedChildRun("plain-s1", tmp_path / "plain-s1", -9, tmp_path / "plain-s1.log"),
    ]))
    assert cli.main(["scenario", "check", "x.yaml"]) == 4
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bug in found-rl" not in err
    assert f"guided-s0: exited 1; run folder {tmp_path / 'guided-s0'}, log {tmp_path / 'guided-s0.log'}" in err
    assert f"plain-s1: killed by signal 9; run folder {tmp_path / 'plain-s1'}" in err


def test_ctrl_c_is_not_a_bug(failing_scenario_check, capsys):
    failing_scenario_check(KeyboardInterrupt())
    assert cli.main(["scenario", "check", "x.yaml"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_child_runs_stopped_by_ctrl_c_are_named_as_interrupted_and_exit_130(failing_scenario_check, capsys, tmp_path):
    failing_scenario_check(ChildRunsInterrupted("bench guidance", [
        FailedChildRun("guided-s0", tmp_path / "guided-s0", 130, tmp_path / "guided-s0.log"),
    ]))
    assert cli.main(["scenario", "check", "x.yaml"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bug in found-rl" not in err and "failed" not in err
    assert err.startswith("found-rl scenario: bench guidance: interrupted; 1 run(s) did not finish")
    assert f"guided-s0: interrupted (Ctrl-C); run folder {tmp_path / 'guided-s0'}" in err


def test_a_missing_path_from_vlm_server_becomes_the_users_and_a_plain_one_stays_a_bug():
    from vlm_server.errors import MissingPathError as ServerMissingPath

    with pytest.raises(MissingPathError, match=r"server config /c\.yaml does not exist"), as_user_error():
        raise ServerMissingPath("server config /c.yaml does not exist")
    with pytest.raises(FileNotFoundError) as raised, as_user_error():
        raise FileNotFoundError(2, "No such file or directory", "/internal/cache")
    assert not isinstance(raised.value, UserError)


def test_a_missing_run_folder_file_via_the_command_is_one_line(tmp_path, capsys):
    assert cli.main(["plot", str(tmp_path), "--out", str(tmp_path / "curves.png")]) == 2
    err = capsys.readouterr().err
    assert "no evaluations.jsonl" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
