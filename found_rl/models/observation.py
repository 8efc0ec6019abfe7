"""Observation layouts the networks accept, and numpy → torch conversion of observations.

Two layouts exist: the driving observation ``{"bev": (C, H, W) uint8, "state": (S,) float32}``
and a flat vector ``(D,) float32`` (gymnasium classics such as Pendulum or CartPole). An
``ObsSpec`` names which one, so a checkpoint can rebuild its network without the env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

TensorObs = torch.Tensor | dict[str, torch.Tensor]
NumpyObs = np.ndarray | dict[str, np.ndarray]


@dataclass(frozen=True)
class ObsSpec:
    """Shape of one observation.

    Attributes:
        bev_shape: ``(C, H, W)`` of the uint8 bird's-eye view, or ``None`` for a vector layout.
        state_dim: length of the float32 state vector next to the BEV (driving layout).
        vector_dim: length of the flat float32 observation (vector layout), else ``None``.
    """

    bev_shape: tuple[int, int, int] | None = None
    state_dim: int | None = None
    vector_dim: int | None = None

    def __post_init__(self) -> None:
        is_driving = self.bev_shape is not None and self.state_dim is not None
        is_vector = self.vector_dim is not None and self.bev_shape is None and self.state_dim is None
        if is_driving == is_vector:
            raise ValueError(
                "ObsSpec: give either bev_shape and state_dim (driving layout) or vector_dim alone, "
                f"got bev_shape={self.bev_shape}, state_dim={self.state_dim}, vector_dim={self.vector_dim}"
            )

    @property
    def is_dict(self) -> bool:
        """True for the ``{"bev", "state"}`` driving layout."""
        return self.bev_shape is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form for checkpoints."""
        return {
            "bev_shape": self.bev_shape,
            "state_dim": self.state_dim,
            "vector_dim": self.vector_dim,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObsSpec:
        bev = data.get("bev_shape")
        return cls(
            bev_shape=tuple(bev) if bev is not None else None,  # type: ignore[arg-type]
            state_dim=data.get("state_dim"),
            vector_dim=data.get("vector_dim"),
        )


def obs_spec_from_space(space: Any) -> ObsSpec:
    """Read an ``ObsSpec`` from a gymnasium observation space.

    Raises:
        ValueError: for a space the networks cannot take (names the space and what is allowed).
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        keys = set(space.spaces)
        if keys != {"bev", "state"}:
            raise ValueError(f"observation space: expected Dict keys {{'bev', 'state'}}, got {sorted(keys)}")
        bev, state = space["bev"], space["state"]
        if not (isinstance(bev, spaces.Box) and bev.dtype == np.uint8 and len(bev.shape) == 3):
            raise ValueError(f"observation space: 'bev' must be a uint8 Box of shape (C, H, W), got {bev}")
        if not (isinstance(state, spaces.Box) and len(state.shape) == 1):
            raise ValueError(f"observation space: 'state' must be a 1-D Box, got {state}")
        return ObsSpec(bev_shape=tuple(int(d) for d in bev.shape), state_dim=int(state.shape[0]))  # type: ignore[arg-type]
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return ObsSpec(vector_dim=int(space.shape[0]))
    raise ValueError(f"observation space: expected Dict(bev=uint8 (C,H,W), state=(S,)) or a 1-D Box, got {space}")


def obs_to_tensor(obs: NumpyObs, spec: ObsSpec, device: torch.device | str = "cpu") -> tuple[TensorObs, bool]:
    """Convert a numpy observation (single or batched) to tensors with a batch dimension.

    The BEV stays uint8 (the encoder scales it), which keeps host→device copies small.

    Returns:
        ``(tensor_obs, was_single)``; ``was_single`` tells the caller to drop the batch axis again.

    Raises:
        ValueError: if the observation does not match ``spec`` (names the key and shapes).
    """
    if spec.is_dict:
        if not isinstance(obs, dict) or set(obs) != {"bev", "state"}:
            got = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"observation: expected a dict with keys ['bev', 'state'], got {got}")
        bev = np.asarray(obs["bev"])
        state = np.asarray(obs["state"], dtype=np.float32)
        bev_shape = spec.bev_shape or ()
        single = bev.ndim == 3
        if single:
            bev, state = bev[None], state[None]
        if bev.shape[1:] != bev_shape or state.shape[1:] != (spec.state_dim,) or len(bev) != len(state):
            raise ValueError(
                f"observation: expected bev (B,{','.join(map(str, bev_shape))}) and state (B,{spec.state_dim}), "
                f"got bev {bev.shape} and state {state.shape}"
            )
        if bev.dtype != np.uint8:
            raise ValueError(f"observation: 'bev' must be uint8 (0..255), got {bev.dtype}")
        tensors = {
            "bev": torch.as_tensor(bev, device=device),
            "state": torch.as_tensor(state, device=device),
        }
        return tensors, single
    if isinstance(obs, dict):
        raise ValueError(f"observation: expected an array of length {spec.vector_dim}, got a dict")
    array = np.asarray(obs, dtype=np.float32)
    single = array.ndim == 1
    if single:
        array = array[None]
    if array.ndim != 2 or array.shape[1] != spec.vector_dim:
        raise ValueError(
            f"observation: expected shape (B, {spec.vector_dim}) or ({spec.vector_dim},), got {array.shape}"
        )
    return torch.as_tensor(array, device=device), single


def batch_size_of(obs: TensorObs) -> int:
    """Number of observations in a batch of either layout."""
    return int(obs["state"].shape[0]) if isinstance(obs, dict) else int(obs.shape[0])
