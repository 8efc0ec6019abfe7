"""Checkpoints: atomic writes, and loading a policy for evaluation without the learner.

A checkpoint is one ``torch.save`` file: the policy's ``PolicySpec`` (plain data, so the network
can be rebuilt), the policy weights, and optionally the learner's full training state for
resuming. It is written to a temporary file in the same folder and moved into place with
``os.replace``, so a crash never leaves a half-written checkpoint (ARCHITECTURE §9).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from found_rl.atomic import replaced_atomically
from found_rl.errors import UserError
from found_rl.models.policy import DrivingPolicy, PolicySpec, build_actor

FORMAT = "found-rl-checkpoint"
FORMAT_VERSION = 1


def save_checkpoint(
    path: str | Path,
    spec: PolicySpec,
    policy_state: dict[str, torch.Tensor],
    training_state: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint atomically.

    Args:
        path: destination file (parent folders are created).
        spec: how to rebuild the policy network.
        policy_state: the actor's ``state_dict`` (SAC actor or PPO actor-critic).
        training_state: optional learner ``state_dict()`` for resuming.
        metadata: optional plain data (global step, config, seed, ...).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "policy_spec": spec.to_dict(),
        "policy_state": {key: value.detach().cpu() for key, value in policy_state.items()},
        "training_state": training_state,
        "metadata": metadata or {},
    }
    with replaced_atomically(path) as tmp:
        torch.save(payload, tmp)
    return path


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and validate a checkpoint file.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a readable found-rl checkpoint (names the path and why).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path}: no such file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises several types for truncated or foreign files
        raise UserError(
            f"checkpoint {path}: cannot be read ({type(exc).__name__}: {exc}); is it truncated or not a checkpoint?"
        ) from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"checkpoint {path}: not a found-rl checkpoint (missing format marker {FORMAT!r})")
    if payload.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"checkpoint {path}: format_version {payload.get('format_version')!r}, this found-rl reads {FORMAT_VERSION}"
        )
    return payload


def load_policy(path: str | Path, device: torch.device | str = "cpu") -> DrivingPolicy:
    """Rebuild the policy stored in a checkpoint, ready for ``act(obs, deterministic=True)``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is corrupt or its weights do not fit its network spec.
    """
    payload = read_checkpoint(path)
    try:
        spec = PolicySpec.from_dict(payload["policy_spec"])
        actor = build_actor(spec)
        actor.load_state_dict(payload["policy_state"])
    except (KeyError, RuntimeError, TypeError) as exc:
        raise UserError(f"checkpoint {path}: policy does not match its spec ({type(exc).__name__}: {exc})") from exc
    return DrivingPolicy(spec, actor, device)
