"""Live feedback while an episode runs: route completion and simulated time on a tqdm bar."""

from __future__ import annotations

from typing import Any

from found_rl.world import STEP_S

POSTFIX_EVERY_STEPS = 10  # refresh the text once per simulated second, not at every 0.1 s step


class EpisodeProgress:
    """A ``run_episode`` ``on_step`` hook that shows the running episode on ``bar``.

    Args:
        bar: a tqdm bar.
        completion_as_bar: the bar itself counts route completion in percent (``total=100``,
            one bar per route, closed when the episode ends: ``expert drive``); otherwise
            completion goes in the postfix of a bar that counts something else (routes: ``eval``).
    """

    def __init__(self, bar: Any, completion_as_bar: bool) -> None:
        self.bar = bar
        self.completion_as_bar = completion_as_bar
        self.steps = 0

    def __call__(self, info: dict[str, Any]) -> None:
        self.steps += 1
        summary = info.get("episode")  # the last step's: it counts a completed route as 100 %
        completion = summary.route_completion if summary is not None else info.get("route_completion", 0.0)
        percent = int(100 * float(completion))
        if self.completion_as_bar and percent > self.bar.n:
            self.bar.update(percent - self.bar.n)
        if self.steps % POSTFIX_EVERY_STEPS == 0 or summary is not None:
            sim = f"sim {self.steps * STEP_S:.0f} s"
            self.bar.set_postfix_str(sim if self.completion_as_bar else f"route {percent} %, {sim}")
        if self.completion_as_bar and summary is not None:
            self.bar.close()  # the route's bar is done: what follows (a video write) prints below it
