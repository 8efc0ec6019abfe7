"""Which towns CLIP frames were driven in: the per-town rows of ``clip evaluate`` and the training towns.

A reward model that learnt its training towns' look scores well on their held-out episodes
and may not elsewhere; only a dataset of other road networks measures generalisation across
towns. Town names and the overlap check are ``found_rl.dataset.town_overlap``'s; this module
reads them off frames and off a checkpoint's training record (``training_towns``, written by
``clip finetune``), falling back to the training dataset itself for checkpoints that predate it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from found_rl.clip.data import ClipFrames
from found_rl.clip.evaluate import dataset_fingerprint
from found_rl.dataset.metadata import read_metadata
from found_rl.dataset.town_overlap import networks_of, town_name


class FrameTown(NamedTuple):
    """A frame's ``meta["town"]`` and ``meta["network"]``, None where its dataset did not record them."""

    town: str | None
    network: str | None


def frame_towns(frames: ClipFrames) -> list[FrameTown]:
    """Each frame's town and network (both None for frames read without them)."""
    if frames.towns is None or frames.networks is None:
        return [FrameTown(None, None)] * len(frames)
    # plain str: numpy's str_ would not load back from a weights-only checkpoint
    towns, networks = frames.towns.tolist(), frames.networks.tolist()
    return [FrameTown(town or None, network or None) for town, network in zip(towns, networks)]


def town_names(frames: ClipFrames) -> list[str] | None:
    """Each frame's readable town (``town_name``); None when no frame records one (no per-town rows)."""
    towns = frame_towns(frames)
    if all(t.town is None and t.network is None for t in towns):
        return None
    return [town_name(t) for t in towns]


def frames_networks(frames: ClipFrames) -> dict[str, str]:
    """``{network hash: town}`` of the frames that record their road network."""
    return networks_of(frame_towns(frames))


def training_networks(training: dict[str, Any], frames: ClipFrames, data_dir: str | Path) -> dict[str, str] | None:
    """``{network hash: town}`` of a checkpoint's training episodes; None when unknown.

    The checkpoint's own record comes first (it survives the training data's deletion). An
    older checkpoint's towns are read from its training data: from ``frames`` when ``data_dir``
    is that dataset, else from the recorded folder when it is still on this machine. Either way
    these are all non-held-out episodes, also those a ``--max-frames`` run never reached.
    """
    recorded = training.get("training_towns")
    if isinstance(recorded, dict) and recorded:  # {}: trained on data that records no towns
        return {str(network): str(town) for network, town in recorded.items()}
    held_out = np.asarray(training.get("held_out_episodes", []), dtype=np.int64)
    folder = training.get("data")
    if training.get("data_sha256") == dataset_fingerprint(data_dir):
        networks = frames_networks(frames.subset(~np.isin(frames.episodes, held_out)))
    elif isinstance(folder, str) and Path(folder).is_dir():
        samples = read_metadata(folder, flag="the checkpoint's training data")
        networks = networks_of(s for s in samples if s.episode not in set(held_out.tolist()))
    else:
        return None
    return networks or None
