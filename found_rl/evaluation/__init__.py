"""Closed-loop evaluation on route files with CARLA-leaderboard metrics (``found-rl eval``)."""

from found_rl.evaluation.agents import AGENT_SPECS, Agent, CheckpointAgent, ExpertAgent, make_agent
from found_rl.evaluation.results import ResultsFile, build_record
from found_rl.evaluation.runner import EpisodeOutcome, episode_index, episode_seed, evaluate, run_episode

__all__ = [
    "AGENT_SPECS",
    "Agent",
    "CheckpointAgent",
    "EpisodeOutcome",
    "ExpertAgent",
    "ResultsFile",
    "build_record",
    "episode_index",
    "episode_seed",
    "evaluate",
    "make_agent",
    "run_episode",
]
