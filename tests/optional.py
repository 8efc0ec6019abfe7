"""Optional extras (``found-rl[hf]``) that a test module needs, found without importing them."""

from __future__ import annotations

import importlib.util

import pytest


def require(*packages: str) -> None:
    """Skip the calling test module unless every package is installed.

    ``pytest.importorskip`` imports the package while the suite is collected, in every xdist
    worker: ``peft`` imports all of transformers' models (about 6 s a worker). Finding the
    package's spec says the same (installed or not) for nothing; the tests import it when they run.
    """
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"optional extra not installed: {', '.join(missing)} (found-rl[hf])", allow_module_level=True)
