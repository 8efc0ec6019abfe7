"""A user's mistake prints one line and exits 2; anything else is a bug: traceback, report line, exit 1."""

from __future__ import annotations

import pytest

from found_rl import cli
from found_rl.errors import UserError, as_user_error


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
