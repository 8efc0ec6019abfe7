"""Closed-loop route evaluation: every route in file order, every repetition freshly reset.

The env decides when an episode ends (route completed, serious infraction, blocked, timeout),
so every agent is judged by the same rules; the runner only feeds actions, records one
leaderboard record per episode and saves the results file after each (resume skips what is
there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from found_rl.evaluation.progress import EpisodeProgress
from found_rl.evaluation.results import ResultsFile, build_record
from found_rl.evaluation.video import VideoRecorder
from found_rl.events import EpisodeSummary
from found_rl.metrics import GlobalScores, route_scores

if TYPE_CHECKING:
    from found_rl.evaluation.agents import Agent


def episode_seed(base_seed: int, route_index: int, repetition: int) -> int:
    """A reset seed that depends only on (seed, route, repetition), so resumed runs match."""
    return int(np.random.SeedSequence([base_seed, route_index, repetition]).generate_state(1)[0])


def episode_index(route_index: int, repetition: int, repetitions: int) -> int:
    """Record index: routes in file order, each route's repetitions together (leaderboard order)."""
    return route_index * repetitions + repetition


@dataclass(frozen=True)
class EpisodeOutcome:
    """A finished episode: the env's summary and the wall-clock seconds it took."""

    summary: EpisodeSummary
    wall_s: float


def run_episode(
    env: Any,
    agent: Agent,
    route_index: int,
    seed: int,
    video: VideoRecorder | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    show_progress: bool = False,
) -> EpisodeOutcome:
    """Drive one episode of route ``route_index`` to its end.

    ``on_step`` gets each step's ``info`` (a progress bar's hook); ``show_progress`` shows
    the video write.

    Raises:
        RuntimeError: if the env ends an episode without ``info["episode"]``.
    """
    start = time.perf_counter()
    obs, info = env.reset(seed=seed, options={"route_index": route_index})
    agent.reset()
    while True:
        snapshot = env.unwrapped.snapshot
        action = np.asarray(agent.act(obs, snapshot), dtype=np.float32).reshape(2)
        if video is not None:
            # The env renders the RGB BEV of this snapshot (render_mode="rgb_array").
            video.add(env.render(), float(info.get("speed_mps", 0.0)), int(info.get("command", -1)), action)
        obs, _, terminated, truncated, info = env.step(action)
        if on_step is not None:
            on_step(info)
        if terminated or truncated:
            break
    summary = info.get("episode")
    if not isinstance(summary, EpisodeSummary):
        raise RuntimeError(
            f"the env ended route {route_index} without an EpisodeSummary in info['episode'] "
            f"(got {type(summary).__name__}); this is a bug in the env"
        )
    if video is not None:
        video.close(show_progress)
    return EpisodeOutcome(summary=summary, wall_s=time.perf_counter() - start)


def evaluate(
    env: Any,
    agent: Agent,
    results: ResultsFile,
    num_routes: int,
    repetitions: int,
    seed: int,
    video_dir: Path | None = None,
    video_format: str = "gif",
    show_progress: bool = True,
    video_episodes: int | None = None,
) -> GlobalScores:
    """Run every (route, repetition) not yet in ``results``; save after each; return global scores.

    With ``video_dir``, the first ``video_episodes`` episodes (all when ``None``) are recorded.
    """
    from tqdm import tqdm

    done = results.finished_indices
    total = num_routes * repetitions
    with tqdm(total=total, initial=len(done), unit="route", disable=not show_progress, desc="eval") as bar:
        for route_index in range(num_routes):
            for repetition in range(repetitions):
                index = episode_index(route_index, repetition, repetitions)
                if index in done:
                    continue
                video = None
                if video_dir is not None and (video_episodes is None or index < video_episodes):
                    video = VideoRecorder(
                        video_dir / f"{index:04d}_route{route_index}_rep{repetition}.{video_format}"
                    )
                outcome = run_episode(
                    env,
                    agent,
                    route_index,
                    episode_seed(seed, route_index, repetition),
                    video,
                    on_step=EpisodeProgress(bar, completion_as_bar=False) if show_progress else None,
                )
                scores = route_scores(outcome.summary)
                results.add(build_record(index, repetition, outcome.summary, scores, outcome.wall_s))
                bar.set_postfix(DS=f"{scores.driving_score:.2f}", RC=f"{scores.route_completion:.2f}")
                bar.update(1)
    return results.global_scores()
