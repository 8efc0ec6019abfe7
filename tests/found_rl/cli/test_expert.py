"""``found-rl expert drive`` end to end on the one short tiny-town route: progress, summary, video."""

from pathlib import Path

from PIL import Image

from found_rl.cli import main

TINY_TOWN = Path(__file__).resolve().parents[1] / "evaluation" / "data" / "tiny_town.yaml"


def test_drive_shows_progress_and_writes_one_frame_per_step(tmp_path, capsys):
    video = tmp_path / "route0.gif"
    assert main(["expert", "drive", "--scenario", str(TINY_TOWN), "--route", "0", "--video", str(video)]) == 0
    printed = capsys.readouterr()
    assert "route completion: 100%" in printed.err  # the bar reached the end of the route
    assert "write route0.gif: 100%" in printed.err
    summary = printed.out.splitlines()[0]
    assert summary.startswith("route 0: Completed; DS 1.000") and "s simulated (" in summary, summary
    steps = round(float(summary.split(" m in ")[1].split(" s simulated")[0]) / 0.1)
    with Image.open(video) as gif:
        assert gif.n_frames == steps
        assert gif.info["duration"] == 100  # 10 Hz


def test_drive_without_progress_prints_no_bar(tmp_path, capsys):
    assert main(["expert", "drive", "--scenario", str(TINY_TOWN), "--route", "0", "--no-progress"]) == 0
    printed = capsys.readouterr()
    assert "route completion" not in printed.err and printed.out.startswith("route 0: Completed")
