"""The running-episode hook moves a tqdm bar by route completion and shows simulated time."""

import io
from types import SimpleNamespace

from tqdm import tqdm

from found_rl.evaluation.progress import EpisodeProgress


def feed(progress: EpisodeProgress, completions: list[float]) -> None:
    for completion in completions:
        progress({"route_completion": completion})


def test_completion_drives_the_bar_in_percent_with_simulated_seconds():
    with tqdm(total=100, file=io.StringIO()) as bar:
        progress = EpisodeProgress(bar, completion_as_bar=True)
        feed(progress, [0.004 * step for step in range(1, 21)])  # 20 steps = 2 simulated seconds
        assert bar.n == 8
        assert bar.postfix == "sim 2 s"
        feed(progress, [0.05])  # completion never moves the bar backwards
        assert bar.n == 8
        progress({"route_completion": 0.995, "episode": SimpleNamespace(route_completion=1.0)})
        assert bar.n == 100  # the summary's completion, not the last step's 99.5 %
        assert bar.postfix == "sim 2 s" and bar.disable  # closed: a video write prints below it


def test_on_a_bar_of_routes_completion_goes_in_the_postfix():
    with tqdm(total=3, file=io.StringIO()) as bar:
        progress = EpisodeProgress(bar, completion_as_bar=False)
        feed(progress, [0.05] * 9 + [0.5])
        assert bar.n == 0
        assert bar.postfix == "route 50 %, sim 1 s"
