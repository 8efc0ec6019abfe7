"""``found-rl serve``: a user's mistake exits 2 in one line naming it; a bug of the server keeps its traceback."""

import pytest

from found_rl import cli


@pytest.fixture(autouse=True)
def no_serving(monkeypatch):
    """A mistake that slips through must fail the test, not start a server that never stops."""

    def refuse(app, **kwargs):
        raise AssertionError(f"the server would have started on {kwargs}")

    monkeypatch.setattr("aiohttp.web.run_app", refuse)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--advisor", "fixed-cost", "--advisor-option", "base_ms=-1"], "bad options ['base_ms']"),
        (["--advisor", "fixed-cost", "--advisor-option", "base_msec=1"], "bad options ['base_msec']"),
        (["--advisor", "expert", "--advisor-option", "noise_std=-1"], "noise_std must be a finite number >= 0"),
        (["--advisor", "fixed-cost", "--max-batch-size", "0"], "(--max-batch-size)"),
        (["--advisor", "no_such_module:Advisor"], "cannot import module 'no_such_module'"),
        (["--clip", "openclip", "--clip-option", "checkpoint=/no/such/clip.pt"], "checkpoint /no/such/clip.pt"),
    ],
    ids=["option-value", "unknown-option", "plug-in-option", "flag-value", "backend-spec", "model-path"],
)
def test_a_users_mistake_exits_2_in_one_line_naming_it(capsys, argv, named):
    assert cli.main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("found-rl serve: error: ") and named in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_value_error_of_the_servers_own_code_is_a_bug_with_its_traceback(capsys, monkeypatch):
    from vlm_server.backends.fixed_cost import FixedCostAdvisor

    def broken_init(self, **options):
        raise ValueError("an internal check of ours failed")

    monkeypatch.setattr(FixedCostAdvisor, "__init__", broken_init)
    assert cli.main(["serve", "--advisor", "fixed-cost"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "in broken_init" in err
    assert "ValueError: an internal check of ours failed" in err and "bug in found-rl" in err
    assert "error: " not in err.splitlines()[-1]  # not dressed up as the user's mistake
