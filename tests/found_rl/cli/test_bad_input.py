"""Every user mistake through the real ``found-rl`` entry point: exit 2, one line naming the flag.

Each case fails before any simulator, server or benchmark starts, so the table runs in seconds.
"""

import importlib.util
from pathlib import Path

import pytest

from found_rl import cli

DATA = Path(__file__).resolve().parents[2] / "found_rl" / "evaluation" / "data"
TINY_TOWN = DATA / "tiny_town.yaml"  # one-route scenario on the quickstart map
QUICKSTART = Path(__file__).resolve().parents[3] / "scenarios" / "small_grid.yaml"  # random routes
HAS_MP4 = importlib.util.find_spec("imageio_ffmpeg") is not None


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """Exit code and stderr of ``found-rl argv`` (argparse's own errors exit via SystemExit)."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


@pytest.fixture
def paths(tmp_path, monkeypatch):
    """A file, a folder and a checkpoint-shaped file to misuse; the cwd is ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FOUND_RL_CACHE", str(tmp_path / "cache"))
    Path("afile").write_text("x")
    Path("adir").mkdir()
    Path("adir.gif").mkdir()
    Path("scenario.yaml").write_text(TINY_TOWN.read_text())
    return tmp_path


EVAL = ["eval", "--scenario", str(TINY_TOWN), "--agent", "expert", "--no-progress"]
DRIVE = ["expert", "drive", "--scenario", str(TINY_TOWN)]
COLLECT = ["expert", "collect", "--scenario", str(TINY_TOWN), "--steps", "1", "--no-progress"]
ROUTES = ["scenario", "routes", "--scenario", "scenario.yaml", "--count", "1"]
SIM = ["bench", "sim", "--steps", "1", "--resets", "0", "--vehicles", "0", "--state-vehicles", "0", "--no-pin"]
SERVER = ["bench", "server", "--quick", "--backends", "fixed-cost", "--clients", "1"]

CASES = [
    # (argv, text the error must contain)
    ([*ROUTES, "--count", "0", "--out", "r.xml"], "--count"),
    ([*ROUTES, "--seed", "-1", "--out", "r.xml"], "--seed"),
    ([*ROUTES, "--length-m", "nan", "--out", "r.xml"], "--length-m"),
    ([*ROUTES, "--out", "adir"], "--out adir: is a folder"),
    ([*ROUTES, "--out", "afile/r.xml"], "--out afile/r.xml: afile is a file"),
    ([*ROUTES, "--out", "scenario.yaml"], "is the --scenario file itself"),
    ([*EVAL, "--out", "r.json", "--seed", "-1"], "--seed"),
    ([*EVAL, "--out", "r.json", "--advisor-timeout", "nan"], "--advisor-timeout"),
    ([*EVAL, "--out", "r.json", "--advisor-timeout", "inf"], "--advisor-timeout"),
    ([*EVAL, "--out", "adir"], "--out adir: is a folder"),
    ([*EVAL, "--out", "afile/r.json"], "--out afile/r.json: afile is a file"),
    ([*EVAL, "--out", "r.json", "--video-dir", "afile"], "--video-dir afile: is a file"),
    pytest.param(
        [*EVAL, "--out", "r.json", "--video-dir", "v", "--video-format", "mp4"],
        "--video-format mp4",
        marks=pytest.mark.skipif(HAS_MP4, reason="imageio-ffmpeg is installed"),
    ),
    (["eval", "--scenario", str(TINY_TOWN), "--agent", "checkpoint:afile", "--device", "nodevice", "--out", "r.json"],
     "--device nodevice"),
    ([*DRIVE, "--seed", "-5"], "--seed"),
    ([*DRIVE, "--route", "5"], "--route must be in [0, 1)"),
    (["expert", "drive", "--scenario", str(QUICKSTART), "--route", "0"], "--route 0: --scenario"),
    ([*DRIVE, "--route", "0", "--video", "afile/x.gif"], "--video afile/x.gif: afile is a file"),
    ([*DRIVE, "--route", "0", "--video", "adir.gif"], "--video adir.gif: is a folder"),
    ([*COLLECT, "--out", "afile"], "--out afile: is a file"),
    ([*COLLECT, "--out", "c", "--samples-per-shard", "0"], "--samples-per-shard"),
    ([*COLLECT, "--out", "c", "--seed", "-1"], "--seed"),
    ([*SIM, "--warmup-s", "nan"], "--warmup-s"),
    ([*SIM, "--warmup-s", "-5"], "--warmup-s"),
    ([*SIM, "--warmup-s", "1e6"], "--warmup-s"),
    (["bench", "bev", "--seconds", "-1"], "--seconds"),
    (["bench", "bev", "--seconds", "inf"], "--seconds"),
    (["bench", "policy", "--seconds", "nan"], "--seconds"),  # hung forever before
    (["bench", "policy", "--threads", "-2"], "--threads"),
    (["bench", "learners", "--eval-episodes", "abc"], "--eval-episodes: expected an int >= 1, got 'abc'"),
    (["bench", "sampler", "--quick", "--step-ms", "inf"], "--step-ms"),
    (["bench", "sampler", "--quick", "--seed", "-1"], "--seed"),
    (["bench", "server", "--clients", "a,b"], "--clients"),
    ([*SERVER, "--requests", "0"], "--requests"),
    ([*SERVER, "--duration-s", "nan"], "--duration-s"),  # hung before
    ([*SERVER, "--base-ms", "-5"], "--base-ms"),
    ([*SERVER, "--max-batch-size", "0"], "--max-batch-size"),
    ([*SERVER, "--max-wait-ms", "nan"], "--max-wait-ms"),
    ([*SERVER, "--loss-requests", "-1"], "--loss-requests"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("argv", "named"), CASES)
def test_user_mistake_exits_2_naming_the_flag(paths, capsys, argv, named):
    code, err = run_cli(argv, capsys)
    assert code == 2, err
    assert named in err
    assert "Traceback" not in err
    assert not Path("r.json").exists() and not Path("r.xml").exists()


def test_routes_out_never_overwrites_the_scenario(paths, capsys):
    before = Path("scenario.yaml").read_text()
    run_cli([*ROUTES, "--out", "./scenario.yaml"], capsys)
    assert Path("scenario.yaml").read_text() == before
