"""``found-rl expert collect`` on a short quickstart route: shards read back as written."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from found_rl.cli import expert as expert_cli
from found_rl.dataset import clip_caption, iter_samples, read_manifest
from found_rl.dataset.collect import ActionPerturber, PerturbationConfig
from found_rl.state_vector import STATE_SIZE

ROOT = Path(__file__).resolve().parents[3]
TINY_TOWN = ROOT / "tests" / "found_rl" / "evaluation" / "data" / "tiny_town.yaml"


def run_expert(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    expert_cli.configure(parser)
    args = parser.parse_args(argv)
    return args.run(args)


def test_collect_round_trip_with_perturbations(tmp_path, capsys):
    out = tmp_path / "data"
    argv = [
        "collect",
        "--scenario",
        str(TINY_TOWN),
        "--steps",
        "40",
        "--perturb-chance",
        "0.2",
        "--samples-per-shard",
        "16",
        "--workers",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert run_expert(argv) == 0
    manifest = read_manifest(out)
    assert manifest["num_samples"] == 40
    assert [s["samples"] for s in manifest["shards"]] == [16, 16, 8]
    assert manifest["settings"]["perturb_chance"] == 0.2
    assert manifest["settings"]["perturb_duration_steps"] == 10

    samples = list(iter_samples(out))
    assert len(samples) == 40
    first = samples[0]
    assert first.bev_rgb.shape == (192, 192, 3) and first.bev_rgb.dtype == np.uint8
    assert first.masks.shape == (15, 192, 192)
    assert first.state.shape == (STATE_SIZE,)
    assert first.bev_rgb.any() and first.masks[0].any()  # the road is drawn
    for sample in samples:
        assert sample.caption == clip_caption(sample.command, sample.speed_mps, *sample.action)
        answer = json.loads(sample.chat["conversations"][1]["value"])
        assert answer["throttle"] == pytest.approx(max(float(sample.action[0]), 0.0), abs=0.006)
    perturbed = [s for s in samples if s.meta["is_perturbed"]]
    assert perturbed, "with --perturb-chance 0.2 over 40 steps some actions must be perturbed"
    assert any(not np.allclose(s.executed_action, s.action) for s in perturbed)
    # The expert starts from rest on a free road: it accelerates.
    assert samples[0].action[0] > 0.3 and samples[0].speed_mps == 0.0

    printed = capsys.readouterr().out
    share = 100 * len(perturbed) / 40
    assert f"perturbed {len(perturbed)} of 40 samples ({share:.1f} %)" in printed
    assert "--perturb-chance 0.2 with 1 s bursts expects about 71.4 %" in printed

    with pytest.raises(ValueError, match="not empty"):
        run_expert(argv)


def test_parallel_workers_write_one_reproducible_dataset(tmp_path):
    """Two expert processes, one writer: whole episodes with consecutive steps, numbered in
    reading order, and the same call writes the same samples."""

    def collect(out: Path) -> list:
        argv = ["collect", "--scenario", str(TINY_TOWN), "--steps", "70", "--workers", "2", "--seed", "3"]
        assert run_expert([*argv, "--samples-per-shard", "32", "--out", str(out), "--no-progress"]) == 0
        return list(iter_samples(out))

    samples = collect(tmp_path / "a")
    manifest = read_manifest(tmp_path / "a")
    assert manifest["num_samples"] == 70 and manifest["settings"]["workers"] == 2
    assert [s["samples"] for s in manifest["shards"]] == [32, 32, 6]
    episodes = [s.meta["episode"] for s in samples]
    assert sorted(set(episodes)) == list(range(len(set(episodes)))) and len(set(episodes)) >= 2
    for episode in set(episodes):
        steps = [s.meta["step"] for s in samples if s.meta["episode"] == episode]
        assert steps == list(range(len(steps)))
    for sample in samples:
        assert sample.caption == clip_caption(sample.command, sample.speed_mps, *sample.action)
        assert sample.bev_rgb.shape == (192, 192, 3) and sample.masks.shape == (15, 192, 192)
    again = collect(tmp_path / "b")
    assert [s.meta for s in again] == [s.meta for s in samples]
    assert all(np.array_equal(a.bev_rgb, b.bev_rgb) for a, b in zip(samples, again, strict=True))


def test_perturbation_bursts_last_their_duration_and_are_reproducible():
    def offsets(seed: int) -> list[np.ndarray]:
        config = PerturbationConfig(chance_per_step=0.5, duration_steps=3)
        perturber = ActionPerturber(config, np.random.default_rng(seed))
        return [perturber.apply(np.zeros(2, np.float32)) for _ in range(30)]

    first, again = offsets(1), offsets(1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    nonzero = [bool(np.any(o)) for o in first]
    runs = "".join("1" if n else "0" for n in nonzero).split("0")
    assert all(len(run) % 3 == 0 for run in runs if run)


@pytest.mark.parametrize(
    ("chance", "duration", "expected"),
    [(0.0, 10, 0.0), (1.0, 10, 1.0), (0.2, 10, 2 / 2.8), (0.5, 1, 0.5), (0.02, 10, 0.2 / 1.18)],
)
def test_expected_fraction_matches_the_renewal_formula(chance, duration, expected):
    config = PerturbationConfig(chance_per_step=chance, duration_steps=duration)
    assert config.expected_fraction() == pytest.approx(expected)


def test_expected_fraction_matches_a_long_simulated_run():
    config = PerturbationConfig(chance_per_step=0.05, duration_steps=10)
    perturber = ActionPerturber(config, np.random.default_rng(0))
    perturbed = [bool(np.any(perturber.apply(np.zeros(2, np.float32)))) for _ in range(200_000)]
    assert np.mean(perturbed) == pytest.approx(config.expected_fraction(), abs=0.01)  # 0.345


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_perturbation_chance_is_checked(bad):
    with pytest.raises(ValueError, match="--perturb-chance"):
        PerturbationConfig(chance_per_step=bad)


def test_noise_is_a_deprecated_alias_of_perturb_chance(capsys):
    parser = argparse.ArgumentParser(prog="found-rl expert")
    expert_cli.configure(parser)
    args = parser.parse_args(["collect", "--scenario", "s.yaml", "--steps", "5", "--out", "o", "--noise", "0.1"])
    assert args.perturb_chance == 0.1
    assert "--noise is deprecated; use --perturb-chance" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["collect", "--scenario", "s.yaml", "--steps", "5", "--out", "o", "--perturb-chance", "1.5"])
