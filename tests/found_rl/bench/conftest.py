"""Fixtures of the benchmark tests."""

from __future__ import annotations

import io

import pytest


class Bars(list):
    """The tqdm bars a benchmark opened."""

    def finished(self, desc: str) -> bool:
        """Whether a bar named ``desc`` ran to its (non-zero) total."""
        return any(bar.desc == desc and bar.total and bar.n == bar.total for bar in self)


@pytest.fixture
def progress_bars(monkeypatch) -> Bars:
    """Every tqdm bar a benchmark opens, shown (to a buffer) even without a terminal."""
    import tqdm as tqdm_module

    bars = Bars()

    class Shown(tqdm_module.tqdm):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **{**kwargs, "disable": False, "file": io.StringIO()})
            bars.append(self)

    monkeypatch.setattr(tqdm_module, "tqdm", Shown)
    return bars
