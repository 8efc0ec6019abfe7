"""Fixed array layouts of observation spaces, for batching and for shared-memory transport.

An observation is either one array (``Box``, ``Discrete``, ``MultiBinary``, ``MultiDiscrete``) or
a flat ``Dict`` of such arrays. Batched observations keep that structure: one array, or a dict of
arrays, each with leading batch dimensions such as ``(N,)`` or ``(T, N)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

# One array or a dict of arrays (a Dict observation); batched versions add leading dimensions.
Obs = np.ndarray | dict[str, np.ndarray]

_ALIGN_BYTES = 64
_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)


@dataclass(frozen=True)
class ArraySpec:
    """One array of an observation: its dict key (``None`` for a plain array), shape and dtype,
    and where it sits in a flat byte buffer."""

    key: str | None
    shape: tuple[int, ...]
    dtype: np.dtype
    offset_bytes: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _array_spec(space: gym.Space, key: str | None, offset_bytes: int) -> ArraySpec:
    if not isinstance(space, _ARRAY_SPACES):
        where = f"observation_space[{key!r}]" if key is not None else "observation_space"
        raise ValueError(
            f"{where}: {type(space).__name__} is not supported; expected Box, Discrete, MultiBinary, "
            "MultiDiscrete or a flat Dict of them"
        )
    return ArraySpec(key, tuple(int(d) for d in space.shape), np.dtype(space.dtype), offset_bytes)


class ObsLayout:
    """The arrays of one observation space and how to batch, copy and serialise them."""

    def __init__(self, space: gym.Space) -> None:
        self.is_dict = isinstance(space, gym.spaces.Dict)
        named = list(space.spaces.items()) if self.is_dict else [(None, space)]
        specs, offset = [], 0
        for key, subspace in named:
            spec = _array_spec(subspace, key, offset)
            specs.append(spec)
            offset += -(-spec.nbytes // _ALIGN_BYTES) * _ALIGN_BYTES
        self.specs: tuple[ArraySpec, ...] = tuple(specs)
        self.nbytes = max(offset, _ALIGN_BYTES)

    def allocate(self, leading: tuple[int, ...]) -> Obs:
        """Zero-filled batched observation with the given leading dimensions."""
        arrays = {spec.key: np.zeros(leading + spec.shape, spec.dtype) for spec in self.specs}
        return arrays if self.is_dict else arrays[None]

    def _arrays(self, obs: Any) -> list[np.ndarray]:
        """The observation's arrays in spec order; a dict missing a key raises KeyError."""
        if self.is_dict:
            if not isinstance(obs, Mapping):
                keys = [spec.key for spec in self.specs]
                raise ValueError(f"observation: expected a dict with keys {keys}, got {type(obs).__name__}")
            return [np.asarray(obs[spec.key]) for spec in self.specs]
        return [np.asarray(obs)]

    def set_row(self, batch: Obs, index: int | tuple[int, ...], obs: Any) -> None:
        """Write one observation into ``batch[index]``."""
        targets = batch.values() if self.is_dict else [batch]
        for target, array in zip(targets, self._arrays(obs), strict=True):
            target[index] = array

    def copy(self, batch: Obs) -> Obs:
        """A deep copy of a batched observation."""
        return {key: array.copy() for key, array in batch.items()} if self.is_dict else batch.copy()

    def write(self, buffer: memoryview, obs: Any) -> None:
        """Serialise one observation into a flat byte buffer of at least ``nbytes``."""
        for spec, array in zip(self.specs, self._arrays(obs), strict=True):
            view = np.ndarray(spec.shape, spec.dtype, buffer=buffer, offset=spec.offset_bytes)
            view[...] = array

    def read(self, buffer: memoryview) -> Obs:
        """A copy of the observation stored in a flat byte buffer by :meth:`write`."""
        arrays = {
            spec.key: np.ndarray(spec.shape, spec.dtype, buffer=buffer, offset=spec.offset_bytes).copy()
            for spec in self.specs
        }
        return arrays if self.is_dict else arrays[None]

