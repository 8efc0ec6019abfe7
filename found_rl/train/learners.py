"""The learner a run config asks for, with its storage: a replay buffer or a rollout, as the
learner's registry entry says (``found_rl.algos.registry``).

The learner's module turns the run config's ``learner`` section into its own config and takes
the ``guidance`` settings as they are; this module only picks the network and the storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from found_rl.algos.registry import LearnerEntry, Storage, learner_entry
from found_rl.models.encoders import network_preset
from found_rl.models.observation import ObsSpec
from found_rl.train.config import RunConfig

ACTION_DIM = 2


@dataclass(frozen=True)
class BuiltLearner:
    """A learner and the storage it learns from (a ``ReplayBuffer`` or a ``RolloutStorage``)."""

    learner: Any
    storage: Any
    entry: LearnerEntry

    @property
    def off_policy(self) -> bool:
        return not self.entry.on_policy


def network_name(config: RunConfig, device: torch.device) -> str:
    """The network preset: the config's, or for ``auto`` the wide ``roach`` one on CUDA."""
    if config.network == "auto":
        return "roach" if device.type == "cuda" else "cpu"
    return config.network


def learner_config(config: RunConfig, device: torch.device) -> Any:
    """The learner's own config from the run config (guidance settings handed on, not copied)."""
    network = network_preset(network_name(config, device))
    entry = learner_entry(config.algorithm)
    return entry.config_from_run(config.learner, config.guidance, network, config.budget.env_steps)


def build_learner(config: RunConfig, obs_spec: ObsSpec, device: torch.device) -> BuiltLearner:
    """The learner ``config.algorithm`` names, on ``device``, with its storage for
    ``config.sampler.clips`` clips."""
    entry = learner_entry(config.algorithm)
    learner = entry.make(obs_spec, ACTION_DIM, learner_config(config, device), device, config.seed)
    if entry.storage is Storage.REPLAY:
        from found_rl.storage.replay import ReplayBuffer

        storage: Any = ReplayBuffer(
            config.learner.replay_capacity, obs_spec, ACTION_DIM, num_envs=config.sampler.clips, device=device
        )
    else:
        from found_rl.storage.rollout import RolloutStorage

        storage = RolloutStorage(config.learner.rollout_steps, config.sampler.clips, obs_spec, (ACTION_DIM,),
                                 device=device)
    return BuiltLearner(learner, storage, entry)
