"""Checkpoints of a training run: everything a resumed run needs to continue exactly.

A checkpoint is the learner's full state (networks, optimisers, entropy coefficient), the run's
counters (env steps, updates, schedule marks), every random generator, the sampler's episode
counters and the replay buffer. The buffer goes to its own ``replay_<env steps>.npz`` beside
``checkpoint.pt``; both are written atomically, the buffer first, and the previous pair is
deleted only after the new ``checkpoint.pt`` is in place, so a crash or a full disk at any point
leaves the previous checkpoint whole.

Checkpoints are taken where every clip resets (a FAST round boundary), so no episode is in
flight and a resumed run replays the same episodes (the sampler seeds each episode from
``(seed, clip, episode)``). The last checkpoint of a run cut short (budget, Ctrl-C) may fall
inside a round; resuming it starts fresh episodes there and is marked ``exact: false``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from found_rl.atomic import replaced_atomically
from found_rl.checkpoint import read_checkpoint, save_checkpoint
from found_rl.errors import MissingPathError, UserError
from found_rl.models.policy import PolicySpec
from found_rl.state_vector import STATE_SIZE
from found_rl.storage.replay import ReplayBuffer


def rng_states(generators: dict[str, np.random.Generator]) -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "numpy": {name: rng.bit_generator.state for name, rng in generators.items()},
    }


def restore_rng_states(states: dict[str, Any], generators: dict[str, np.random.Generator]) -> None:
    torch.set_rng_state(states["torch"])
    for name, rng in generators.items():
        rng.bit_generator.state = states["numpy"][name]


def save_run_checkpoint(
    path: Path,
    spec: PolicySpec,
    policy_state: dict[str, torch.Tensor],
    training_state: dict[str, Any],
    replay: ReplayBuffer | None,
    env_steps: int,
) -> None:
    """Write the replay buffer (if given), then the checkpoint, then drop the previous buffer."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    replay_name = None
    if replay is not None:
        replay_name = f"replay_{env_steps:010d}.npz"
        with replaced_atomically(folder / replay_name) as tmp:
            replay.save(tmp)
    state = {**training_state, "replay_file": replay_name}
    save_checkpoint(path, spec, policy_state, training_state=state, metadata={"env_steps": env_steps})
    for old in folder.glob("replay_*.npz"):
        if old.name != replay_name:
            with contextlib.suppress(OSError):
                old.unlink()


def load_run_checkpoint(path: Path) -> dict[str, Any]:
    """The training state of a run checkpoint.

    Raises:
        FileNotFoundError: no checkpoint (the run never reached its first one).
        ValueError: a corrupt checkpoint, one without training state, a missing replay file, or
            networks built for another state vector than today's env gives.
    """
    if not path.is_file():
        raise MissingPathError(
            f"--resume: {path} does not exist; the run stopped before its first checkpoint (start it again)"
        )
    payload = read_checkpoint(path)
    state = payload.get("training_state")
    if not isinstance(state, dict) or "learner" not in state or "counters" not in state:
        raise UserError(f"--resume: {path} holds a policy but no training state; it cannot be resumed")
    saved_state_dim = payload.get("policy_spec", {}).get("obs", {}).get("state_dim")
    if saved_state_dim is not None and saved_state_dim != STATE_SIZE:
        raise UserError(
            f"--resume: {path} was trained on a {saved_state_dim}-number state vector, and the env now gives "
            f"{STATE_SIZE} (the route points ahead joined Roach's ten): start the run again in a new --run-dir"
        )
    replay_name = state.get("replay_file")
    if replay_name is not None and not (path.parent / replay_name).is_file():
        raise UserError(f"--resume: {path} needs {replay_name}, which is missing from {path.parent}")
    return state
