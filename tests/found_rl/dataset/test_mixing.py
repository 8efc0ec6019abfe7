"""DAgger collection: a learner drives, the expert labels every state, β mixes in the expert."""

import argparse
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from found_rl.algos.sac import SAC, SacConfig
from found_rl.bev import BevConfig
from found_rl.checkpoint import save_checkpoint
from found_rl.cli import expert as expert_cli
from found_rl.dataset import iter_samples, read_manifest
from found_rl.dataset.mixing import DaggerMix
from found_rl.models.encoders import EncoderConfig, NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.state_vector import STATE_SIZE

TINY_TOWN = Path(__file__).resolve().parents[1] / "evaluation" / "data" / "tiny_town.yaml"
TINY = NetworkConfig(
    encoder=EncoderConfig(conv_channels=(4, 4, 4, 4), bottleneck_channels=2, state_hidden=(8, 8), features_dim=16),
    actor_hidden=(16,),
    critic_hidden=(16,),
)


def run_expert(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    expert_cli.configure(parser)
    args = parser.parse_args(argv)
    return args.run(args)


def tiny_checkpoint(path: Path, bev_shape: tuple[int, int, int] = BevConfig().observation_shape) -> Path:
    torch.manual_seed(0)
    sac = SAC(ObsSpec(bev_shape=bev_shape, state_dim=STATE_SIZE), 2, SacConfig(network=TINY))
    return save_checkpoint(path, sac.policy_spec, sac.actor.state_dict())


def collect(out: Path, *extra: str, steps: int = 20, workers: int = 1) -> list:
    argv = ["collect", "--scenario", str(TINY_TOWN), "--steps", str(steps), "--workers", str(workers), "--no-progress"]
    assert run_expert([*argv, "--out", str(out), *extra]) == 0
    return list(iter_samples(out))


class Constant:
    name = "checkpoint:const"

    def __init__(self) -> None:
        self.calls = 0

    def reset(self) -> None:
        pass

    def act(self, obs, snapshot) -> np.ndarray:
        self.calls += 1
        return np.array([0.25, -0.5], np.float32)

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("beta", "expert_share"), [(0.0, 0.0), (1.0, 1.0), (0.3, 0.3)])
def test_the_expert_is_executed_with_probability_beta(beta, expert_share):
    driver = Constant()
    mix = DaggerMix(driver, beta, np.random.default_rng(0))
    expert = np.array([1.0, 0.0], np.float32)
    picks = [mix.choose(expert, {}, None) for _ in range(4000)]
    share = np.mean([by == "expert" for _, by in picks])
    assert share == pytest.approx(expert_share, abs=0.03)
    assert all(np.array_equal(a, expert) if by == "expert" else by == "checkpoint" for a, by in picks)
    assert driver.calls == 4000  # the driver sees every step, also those the expert takes


class Following(Constant):
    """A driver that can keep up with the expert's steps without choosing (an advisor skips its request)."""

    def __init__(self) -> None:
        super().__init__()
        self.followed = 0

    def follow(self, obs, snapshot) -> None:
        self.followed += 1


def test_a_driver_that_can_follow_is_asked_only_on_the_steps_it_drives():
    driver, plain = Following(), Constant()
    expert = np.array([1.0, 0.0], np.float32)
    picks = [DaggerMix(d, 0.4, np.random.default_rng(7)) for d in (driver, plain)]
    chosen = [[mix.choose(expert, {}, None)[1] for _ in range(500)] for mix in picks]
    assert chosen[0] == chosen[1]  # the same draws: following changes no dataset
    driven = sum(by == "checkpoint" for by in chosen[0])
    assert driver.calls == driven and driver.followed == 500 - driven and 0 < driven < 500


def test_without_a_driver_the_expert_drives_and_nothing_is_drawn():
    rng = np.random.default_rng(0)
    mix = DaggerMix(None, 0.5, rng)
    expert = np.array([0.3, 0.1], np.float32)
    assert all(mix.choose(expert, {}, None)[1] == "expert" for _ in range(10))
    assert rng.random() == np.random.default_rng(0).random()


def test_a_checkpoint_drives_while_the_expert_labels(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "policy.pt")
    learner = collect(tmp_path / "beta0", "--driver", f"checkpoint:{checkpoint}", "--beta", "0")
    assert all(s.meta["driver"] == "checkpoint" for s in learner)
    assert sum(not np.allclose(s.executed_action, s.action, atol=1e-3) for s in learner) > len(learner) // 2
    settings = read_manifest(tmp_path / "beta0")["settings"]
    assert settings["driver"] == f"checkpoint:{checkpoint}" and settings["beta"] == 0.0

    expert = collect(tmp_path / "beta1", "--driver", f"checkpoint:{checkpoint}", "--beta", "1")
    assert all(s.meta["driver"] == "expert" for s in expert)
    assert all(np.array_equal(s.executed_action, s.action) for s in expert)
    # the labels are the expert's in both: the same first state gets the same label
    np.testing.assert_allclose(learner[0].action, expert[0].action)


def test_perturbations_still_apply_to_the_drivers_action_in_worker_processes(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "policy.pt")
    argv = ("--driver", f"checkpoint:{checkpoint}", "--perturb-chance", "1", "--beta", "0")
    samples = collect(tmp_path / "d", *argv, workers=2)
    assert len(samples) == 20
    assert all(s.meta["is_perturbed"] and s.meta["driver"] == "checkpoint" for s in samples)


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bad_driver(kind: str, tmp: Path) -> str:
    if kind == "advisor down":
        return f"advisor:http://127.0.0.1:{unused_port()}"
    if kind == "corrupt":
        (tmp / "corrupt.pt").write_bytes(b"not a checkpoint")
    if kind == "other bev":  # 192 px cannot pool to 50 px: the env cannot give this policy its input
        tiny_checkpoint(tmp / "other bev.pt", (15, 50, 50))
    return f"checkpoint:{tmp / kind}.pt"


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("advisor down", r"--driver advisor:http://127\.0\.0\.1:\d+: no advisor server answered"),
        ("missing", r"--driver checkpoint:.*missing\.pt: no such checkpoint"),
        ("corrupt", r"--driver checkpoint:.*corrupt\.pt: checkpoint .*corrupt\.pt"),
        ("other bev", r"--driver checkpoint:.*other bev\.pt: the policy was built for bev \(15, 50, 50\)"),
    ],
)
def test_a_driver_that_cannot_drive_is_refused_before_collection(tmp_path, kind, message):
    out = tmp_path / "data"
    argv = ["collect", "--scenario", str(TINY_TOWN), "--steps", "5", "--workers", "1", "--out", str(out)]
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        run_expert([*argv, "--driver", bad_driver(kind, tmp_path), "--advisor-timeout", "1"])
    assert not out.exists()


def test_a_checkpoint_with_a_pooled_bev_gets_the_env_it_was_trained_on(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "small.pt", (15, 48, 48))
    samples = collect(tmp_path / "d", "--driver", f"checkpoint:{checkpoint}", steps=5)
    assert samples[0].bev_rgb.shape == (192, 192, 3)  # the stored BEV stays full size


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--beta", "0.5"], r"--beta 0\.5: needs --driver"),
        (["--driver", "expert:now"], "--driver: expected advisor:URL or checkpoint:PATH"),
    ],
)
def test_driver_flags_are_checked(tmp_path, extra, message):
    argv = ["collect", "--scenario", str(TINY_TOWN), "--steps", "5", "--out", str(tmp_path / "o"), *extra]
    with pytest.raises(ValueError, match=message):
        run_expert(argv)
