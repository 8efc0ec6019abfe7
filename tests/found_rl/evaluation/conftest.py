"""Shared fixtures: scenario paths and running one found-rl subcommand module on its own."""

import argparse
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def quickstart() -> Path:
    return ROOT / "scenarios" / "small_grid.yaml"


@pytest.fixture
def one_route() -> Path:
    """One 50 m route on the quickstart map (about 10 s of driving)."""
    return Path(__file__).parent / "data" / "quickstart_one_route.xml"


@pytest.fixture
def tiny_town() -> Path:
    """The quickstart map with little traffic, a 5 s warm-up and the one-route file."""
    return Path(__file__).parent / "data" / "tiny_town.yaml"


@pytest.fixture
def run_command():
    """``run_command(module, argv)``: parse ``argv`` with ``module.configure`` and run it."""

    def run(module: str, argv: list[str]) -> int:
        parser = argparse.ArgumentParser()
        importlib.import_module(module).configure(parser)
        args = parser.parse_args(argv)
        return args.run(args)

    return run
