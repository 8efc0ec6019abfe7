"""Fixtures shared by the found_rl tests."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest


def _drop_members(shard: Path, suffix: str) -> None:
    with tarfile.open(shard) as tar:
        kept = [(member, tar.extractfile(member).read()) for member in tar if not member.name.endswith(suffix)]
    with tarfile.open(shard, "w") as tar:
        for member, payload in kept:
            tar.addfile(member, io.BytesIO(payload))


@pytest.fixture
def drop_shard_members():
    """``drop_shard_members(shard, suffix)``: rewrite a dataset shard without its members ending in ``suffix``."""
    return _drop_members
