"""Training runs: from a scenario file (or a run config) to a trained, evaluated policy.

``found_rl.train`` sits above the learners, storage, models and the FAST sampler (STYLE §6):
:mod:`config` validates run configs, :mod:`envs` adds what advisor requests need to each
observation's info, :mod:`labels` carries requests out and answers onto the replay entries,
:mod:`server` starts an advisor for the run, :mod:`evaluator` evaluates on held-out routes,
:mod:`checkpointing` saves and resumes, and :mod:`loop` ties them together.

The names below are imported when first used: a command that needs one submodule (``scenario
check`` reads :mod:`config`, ``eval --suite`` reads :mod:`resources`) does not pay for the
loop's torch, learners and sampler (about 4 s of start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from found_rl.lazy import lazy_attributes

if TYPE_CHECKING:
    from found_rl.train.config import RunConfig, load_run_config
    from found_rl.train.loop import Trainer, TrainResult

__all__ = ["RunConfig", "TrainResult", "Trainer", "load_run_config"]

__getattr__, __dir__ = lazy_attributes(
    __name__, {"RunConfig": "config", "load_run_config": "config", "Trainer": "loop", "TrainResult": "loop"}
)
