"""Collecting several towns into one dataset: the plan, each sample's town, the manifest, bad input."""

import argparse
import json
from pathlib import Path

import pytest

from found_rl.cli import expert as expert_cli
from found_rl.dataset import iter_samples, read_manifest
from found_rl.dataset.towns import Segment, plan_segments
from found_rl.maps import scenario_network
from found_rl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
TINY_TOWN = ROOT / "tests" / "found_rl" / "evaluation" / "data" / "tiny_town.yaml"
TINY_SPIDER = Path(__file__).parent / "data" / "tiny_spider.yaml"


def run_expert(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    expert_cli.configure(parser)
    args = parser.parse_args(argv)
    return args.run(args)


def network_of(path: Path) -> str:
    return scenario_network(load_scenario(path))


@pytest.mark.parametrize(
    ("steps", "towns", "workers", "plan"),
    [
        (10, 1, 3, [[Segment(0, 4)], [Segment(0, 3)], [Segment(0, 3)]]),  # one town: the old even shares
        (10, 2, 1, [[Segment(0, 5), Segment(1, 5)]]),
        (10, 3, 2, [[Segment(0, 4), Segment(1, 1)], [Segment(1, 2), Segment(2, 3)]]),
        (2, 3, 4, [[Segment(0, 1)], [Segment(1, 1)], [], []]),
    ],
)
def test_steps_split_evenly_over_towns_then_over_workers(steps, towns, workers, plan):
    assert plan_segments(steps, towns, workers) == plan


@pytest.mark.parametrize(("steps", "towns", "workers"), [(97, 3, 4), (5, 7, 2), (1000, 2, 8)])
def test_every_town_gets_its_share_and_every_worker_its_share(steps, towns, workers):
    plan = plan_segments(steps, towns, workers)
    per_town = [sum(s.steps for w in plan for s in w if s.town == town) for town in range(towns)]
    per_worker = [sum(s.steps for s in w) for w in plan]
    assert max(per_town) - min(per_town) <= 1 and sum(per_town) == steps
    assert max(per_worker) - min(per_worker) <= 1


def collect_argv(out: Path, *scenarios: Path, steps: int = 30, workers: int = 1) -> list[str]:
    argv = ["collect", "--steps", str(steps), "--workers", str(workers), "--out", str(out), "--no-progress"]
    for scenario in scenarios:
        argv += ["--scenario", str(scenario)]
    return argv


@pytest.mark.parametrize("workers", [1, 2])
def test_two_scenarios_make_one_dataset_with_each_samples_town(tmp_path, workers):
    out = tmp_path / "data"
    assert run_expert(collect_argv(out, TINY_TOWN, TINY_SPIDER, workers=workers)) == 0
    samples = list(iter_samples(out))
    networks = {"tiny_town": network_of(TINY_TOWN), "tiny_spider": network_of(TINY_SPIDER)}
    assert networks["tiny_town"] != networks["tiny_spider"]
    assert [s.town for s in samples].count("tiny_town") == 15
    assert [s.town for s in samples].count("tiny_spider") == 15
    assert all(s.network == networks[s.town] for s in samples)
    assert all(s.meta["driver"] == "expert" for s in samples)
    manifest = read_manifest(out)
    assert sorted(manifest["towns"], key=lambda t: t["name"]) == [
        {"name": "tiny_spider", "network": networks["tiny_spider"], "samples": 15},
        {"name": "tiny_town", "network": networks["tiny_town"], "samples": 15},
    ]
    # whole episodes stay in one town
    towns_of_episode = {}
    for sample in samples:
        towns_of_episode.setdefault(sample.meta["episode"], set()).add(sample.town)
    assert all(len(towns) == 1 for towns in towns_of_episode.values())


def test_a_run_config_collects_its_scenario_list(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"scenario: [{TINY_TOWN}, {TINY_SPIDER}]\n")
    out = tmp_path / "data"
    assert run_expert(collect_argv(out, config, steps=4)) == 0
    assert [(t["name"], t["samples"]) for t in read_manifest(out)["towns"]] == [("tiny_town", 2), ("tiny_spider", 2)]


def test_a_dataset_without_towns_reads_as_town_unknown(tmp_path):
    out = tmp_path / "data"
    assert run_expert(collect_argv(out, TINY_TOWN, steps=3)) == 0
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["towns"]
    manifest_path.write_text(json.dumps(manifest))
    assert read_manifest(out)["towns"] == []
    sample = next(iter_samples(out))
    del sample.meta["town"], sample.meta["network"]
    assert sample.town is None and sample.network is None


def carla_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "carla_town.yaml"
    path.write_text("backend: carla\nmap: {town: Town01}\nroutes: {random_length_m: 100}\n")
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (lambda tmp: ["--scenario", str(tmp / "missing.yaml")], r"missing\.yaml: no such file"),
        (
            lambda tmp: ["--scenario", str(carla_scenario(tmp))],
            r"--scenario .*carla_town\.yaml: backend: carla needs a CARLA server",
        ),
        (
            lambda tmp: ["--scenario", str(TINY_SPIDER), "--routes", str(tmp / "r.xml")],
            r"--routes applies to one scenario, but --scenario names 2",
        ),
        (lambda tmp: ["--scenario", str(TINY_TOWN)], r"tiny_town\.yaml is already collected"),
    ],
)
def test_scenarios_that_cannot_be_collected_are_refused_before_collection(tmp_path, monkeypatch, extra, message):
    monkeypatch.delenv("FOUND_RL_CARLA", raising=False)
    out = tmp_path / "data"
    argv = [*collect_argv(out, TINY_TOWN, steps=3), *extra(tmp_path)]
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        run_expert(argv)
    assert not out.exists()
