"""Shared helpers: run one found-rl subcommand module without the rest of the CLI."""

import argparse
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
ONE_ROUTE = Path(__file__).parent / "data" / "quickstart_one_route.xml"


def run_command(module: str, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    importlib.import_module(module).configure(parser)
    args = parser.parse_args(argv)
    return args.run(args)


@pytest.fixture
def quickstart_eval_args(tmp_path):
    return ["--scenario", str(QUICKSTART), "--routes", str(ONE_ROUTE), "--no-progress"]
