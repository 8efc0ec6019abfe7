"""Per-sample metadata of an expert dataset, read without decoding a single image.

Baselines fitted on a model's training data and the towns a dataset covers need only each
sample's ``json`` member (command, speed, target, action, episode, town), so this reads that
member alone: a 100k-sample dataset is scanned in seconds, not the minutes its PNGs take.
"""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.dataset.shards import read_manifest
from found_rl.errors import MissingPathError, UserError


@dataclass(frozen=True)
class SampleMeta:
    """What the prompt and the expert say about one sample, and where it was driven.

    Attributes:
        command: RoadOption value.
        speed_mps: the prompt's speed (``found_rl.dataset.text.prompt_speed_mps``).
        target_ego: next route target ``(x forward, y right)``, metres.
        action: the expert ``(acc, steer)``.
        episode: episode index within the dataset.
        town: readable town name (``meta["town"]``), None in datasets that predate it.
        network: content hash of the town's road network (``meta["network"]``), None likewise.
    """

    command: int
    speed_mps: float
    target_ego: tuple[float, float]
    action: tuple[float, float]
    episode: int
    town: str | None = None
    network: str | None = None


def town_fields(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(town, network)`` of a sample's ``meta`` dict; None for what an older dataset lacks."""
    town, network = meta.get("town"), meta.get("network")
    return (None if town is None else str(town)), (None if network is None else str(network))


def sample_meta(metadata: dict[str, Any]) -> SampleMeta:
    """One sample's ``json`` member as a :class:`SampleMeta` (KeyError/ValueError/TypeError if malformed)."""
    meta = metadata.get("meta", {})
    town, network = town_fields(meta)
    acc, steer = (float(v) for v in metadata["action"])
    target_x, target_y = (float(v) for v in metadata["target_ego"])
    return SampleMeta(
        command=int(metadata["command"]),
        speed_mps=float(metadata["speed_mps"]),
        target_ego=(target_x, target_y),
        action=(acc, steer),
        episode=int(meta.get("episode", 0)),
        town=town,
        network=network,
    )


def read_metadata(directory: str | Path, flag: str = "--data") -> list[SampleMeta]:
    """Every sample's metadata, in write order.

    Raises:
        FileNotFoundError: no manifest, or a shard it lists is missing.
        UserError: a malformed ``json`` member (shard and sample named, with ``flag``).
    """
    directory = Path(directory)
    samples: list[SampleMeta] = []
    for shard in read_manifest(directory)["shards"]:
        path = directory / shard["name"]
        if not path.is_file():
            raise MissingPathError(f"{flag} {directory}: shard {shard['name']} listed in the manifest is missing")
        with tarfile.open(path, "r") as tar:
            for member in tar:
                key, _, suffix = member.name.partition(".")
                if not (member.isfile() and suffix == "json"):
                    continue
                handle = tar.extractfile(member)
                try:
                    samples.append(sample_meta(json.loads(handle.read() if handle is not None else b"")))
                except (ValueError, KeyError, TypeError) as exc:
                    raise UserError(
                        f"{flag} {directory}: {path.name}: sample {key}: malformed json member "
                        f"({type(exc).__name__}: {exc}); expected action, command, speed_mps, target_ego"
                    ) from None
    return samples
