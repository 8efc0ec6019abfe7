"""Which road networks a dataset was driven on, and which of them a model's training data shares.

A sample's ``meta["town"]`` is a readable name and ``meta["network"]`` a content hash of the
road network; two datasets share a town when they share a network hash, whatever the names
say (a renamed copy of a town is still the same town). Older datasets record neither: their
samples are in the town :data:`UNKNOWN_TOWN` and take no part in an overlap check. Datasets that
recorded another definition of the hash (the file-byte hashes of older versions) cannot be
compared with today's identities (:mod:`found_rl.maps.identity`): the overlap is then unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

UNKNOWN_TOWN = "unknown"
"""Town name of a sample whose dataset did not record one."""


class HasTown(Protocol):
    town: str | None
    network: str | None


def town_name(sample: HasTown) -> str:
    """The readable town of a sample; its network hash's first 12 digits if only that is known."""
    if sample.town is not None:
        return sample.town
    return sample.network[:12] if sample.network is not None else UNKNOWN_TOWN


def networks_of(samples: Iterable[HasTown]) -> dict[str, str]:
    """``{network hash: town name}`` over the samples that record a network."""
    return {s.network: town_name(s) for s in samples if s.network is not None}


def towns_overlap(evaluated: Mapping[str, str], training: Mapping[str, str]) -> list[dict[str, str]] | None:
    """The networks both datasets cover, as ``{"network", "town", "training_town"}``, sorted by town.

    ``None`` when the two sides recorded their networks under different hash definitions, so
    that an empty overlap would not mean different towns.
    """
    from found_rl.maps.identity import comparable

    if any(not comparable(a, b) for a in evaluated for b in training):
        return None
    shared = sorted(set(evaluated) & set(training), key=lambda network: (evaluated[network], network))
    return [{"network": n, "town": evaluated[n], "training_town": training[n]} for n in shared]


def overlap_warning(overlap: list[dict[str, str]]) -> str:
    """The one-line warning for a non-empty overlap (the scores are then not held out by town)."""
    towns = ", ".join(sorted({entry["town"] for entry in overlap}))
    return (
        f"warning: {len(overlap)} road network(s) of --data are also in the model's training data "
        f"({towns}); these scores are not held out by town"
    )
