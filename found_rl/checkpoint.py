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
from found_rl.errors import UserError, as_user_error
from found_rl.models.policy import DrivingPolicy, PolicySpec, build_actor
from vlm_server.torch_files import load_torch_file

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
        MissingPathError: if ``path`` does not exist.
        UserError: if the file is truncated, corrupt or not a found-rl checkpoint (names the path
            and why). Any other failure of ``torch.load`` (out of memory, a bug) keeps its type.
    """
    with as_user_error():  # the file's own damage; vlm_server never imports found-rl
        payload = load_torch_file(path, "checkpoint", weights_only=False)
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
        MissingPathError: if ``path`` does not exist.
        UserError: if the file is corrupt, its network spec unreadable or its weights do not fit it.
    """
    payload = read_checkpoint(path)
    try:
        spec = PolicySpec.from_dict(payload["policy_spec"])
    except (KeyError, TypeError, ValueError) as exc:  # a spec this found-rl does not write
        raise UserError(f"checkpoint {path}: policy_spec is not readable ({type(exc).__name__}: {exc})") from None
    actor = build_actor(spec)
    try:
        actor.load_state_dict(payload["policy_state"])
    except (KeyError, RuntimeError) as exc:  # missing, unexpected or misshapen weights
        raise UserError(f"checkpoint {path}: policy does not match its spec ({type(exc).__name__}: {exc})") from None
    return DrivingPolicy(spec, actor, device)
