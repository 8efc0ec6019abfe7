"""``found-rl bench learners``: reference parity of the learners on gymnasium classics.

SAC and DrQ-v2 on ``Pendulum-v1`` for 20k steps (Stable-Baselines3 zoo SAC: −176 ± 102; target
≥ −200), PPO on ``CartPole-v1`` within 200k steps (CleanRL: 489 ± 18 within 500k; target ≥ 475),
and PPO on CartPole with ``bench sampler``'s CARLA-like step and reset latency, collected once by
a single clip and once by FAST over 8 clips (target: FAST reaches ≥ 475 in less wall time; METHOD
§4). Each run trains from scratch with one seed and reports the mean return of 10 deterministic
evaluation episodes at the end. The drivers below are deliberately CleanRL-shaped: they step the env,
fill storage and call ``update``; the learners never touch an env.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from found_rl.argtypes import finite_float, int_at_least

SAC_TARGET = -200.0
PPO_TARGET = 475.0
EVAL_EPISODES = 10


@dataclass(frozen=True)
class RunResult:
    """One training run: final evaluation return and wall-clock seconds."""

    seed: int
    eval_return: float
    wall_s: float
    env_steps: int


def evaluate(
    policy_act: Callable[[Any], Any],
    env_id: str,
    seed: int,
    episodes: int = EVAL_EPISODES,
    rescale: bool = False,
) -> float:
    """Mean undiscounted return of ``episodes`` deterministic episodes (seeds ``seed``, ``seed+1``, ...)."""
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id)
    if rescale:
        env = gym.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))  # float32: no cast warning
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action = policy_act(np.asarray(obs, dtype=np.float32))
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def drqv2_pendulum_config() -> Any:
    """DrQ-v2 for state-input Pendulum: the paper's update (one update every 2 env steps, 3-step
    returns, batch 256, clipped noise 0.3).

    Changed from the paper for a 20k-step state-input run: learning rates 1e-3 (the SB3 zoo's
    TD3 on Pendulum), 128-128 MLPs (Pendulum needs no more; a quarter of the 256-256 cost on
    a CPU), σ annealed from 1.0 to 0.1 over the first 10k steps (the paper anneals over
    0.1–2M frames for its far longer runs), τ 0.005, no gradient clipping (the paper's choice;
    Found-RL's 1.0 is the driving default), no augmentation (vector observations).
    """
    from found_rl.algos.drqv2 import DrQV2Config
    from found_rl.models.encoders import NetworkConfig

    return DrQV2Config(
        actor_lr=1e-3,
        critic_lr=1e-3,
        tau=0.005,
        n_step=3,
        update_every_steps=2,
        std_init=1.0,
        std_final=0.1,
        std_decay_end_steps=10_000,
        max_grad_norm=0.0,
        drq_pad_px=0,
        network=NetworkConfig(actor_hidden=(128, 128), critic_hidden=(128, 128)),
    )


@dataclass(frozen=True)
class OffPolicyAgent:
    """How the Pendulum loop acts with one off-policy learner and trains it.

    Attributes:
        learner: the SAC or DrQ-v2 learner (its ``policy()`` is evaluated).
        act: ``(obs batch, global step) -> actions`` while collecting.
        train: ``(buffer, rng, global step)``: the learner's updates after that env step.
    """

    learner: Any
    act: Callable[[Any, int], Any]
    train: Callable[[Any, Any, int], None]


def sac_pendulum_agent(spec: Any, action_dim: int, seed: int) -> OffPolicyAgent:
    """SAC with the SB3 zoo's Pendulum learning rates (1e-3 for actor and critics) and
    CleanRL-sized 256-256 MLPs; one update per env step."""
    from found_rl.algos.sac import SAC, SacConfig
    from found_rl.models.encoders import NetworkConfig

    config = SacConfig(
        policy_lr=1e-3,
        q_lr=1e-3,
        network=NetworkConfig(actor_hidden=(256, 256), critic_hidden=(256, 256)),
    )
    sac = SAC(spec, action_dim, config, seed=seed)

    def train(buffer: Any, rng: Any, global_step: int) -> None:
        sac.update(buffer.sample(config.batch_size, rng), global_step)

    return OffPolicyAgent(sac, lambda obs, global_step: sac.act(obs), train)


def drqv2_pendulum_agent(spec: Any, action_dim: int, seed: int) -> OffPolicyAgent:
    """DrQ-v2 with :func:`drqv2_pendulum_config`: σ(t)-noisy actions, n-step batches, an
    update every ``update_every_steps`` env steps."""
    from found_rl.algos.drqv2 import DrQV2

    config = drqv2_pendulum_config()
    drq = DrQV2(spec, action_dim, config, seed=seed)

    def train(buffer: Any, rng: Any, global_step: int) -> None:
        if global_step % config.update_every_steps == 0:
            drq.update(buffer.sample(config.batch_size, rng, n_step=config.n_step, gamma=config.gamma), global_step)

    return OffPolicyAgent(drq, lambda obs, global_step: drq.act(obs, global_step=global_step), train)


PENDULUM_AGENTS: dict[str, Callable[[Any, int, int], OffPolicyAgent]] = {
    "sac": sac_pendulum_agent,
    "drqv2": drqv2_pendulum_agent,
}
"""The off-policy learners :func:`train_pendulum` runs, by row name."""


def train_pendulum(
    learner: str,
    seed: int,
    total_steps: int = 20_000,
    learning_starts: int = 1_000,
    eval_episodes: int = EVAL_EPISODES,
    progress: Callable[[str], None] | None = None,
    eval_every: int = 0,
) -> RunResult:
    """CleanRL-style off-policy loop on Pendulum-v1 (actions rescaled to [-1, 1]) for the
    learner ``learner`` (a key of :data:`PENDULUM_AGENTS`).

    With ``progress`` and ``eval_every > 0``, also reports a 5-episode deterministic evaluation
    every ``eval_every`` steps (a learning curve for slow machines).
    """
    import gymnasium as gym
    import numpy as np
    import torch

    from found_rl.models.observation import obs_spec_from_space
    from found_rl.storage.replay import ReplayBuffer

    if learner not in PENDULUM_AGENTS:
        raise ValueError(f"learner: expected one of {', '.join(PENDULUM_AGENTS)}, got {learner!r}")
    start = time.perf_counter()
    # TRY NOT TO MODIFY: seeding
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1.0), np.float32(1.0))
    env.action_space.seed(seed)
    spec = obs_spec_from_space(env.observation_space)
    action_dim = int(env.action_space.shape[0])
    agent = PENDULUM_AGENTS[learner](spec, action_dim, seed)
    buffer = ReplayBuffer(total_steps + total_steps // 100 + 8, spec, action_dim)

    obs, _ = env.reset(seed=seed)
    episode, episode_return = 0, 0.0
    for global_step in range(1, total_steps + 1):
        # ALGO LOGIC: action logic
        action = env.action_space.sample() if global_step <= learning_starts else agent.act(obs[None], global_step)[0]
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.add(
            obs[None],
            action[None],
            np.array([reward]),
            next_obs[None],
            np.array([terminated]),
            np.array([truncated]),
            step_ids=[(0, episode, global_step)],
        )
        obs = next_obs
        episode_return += float(reward)
        if terminated or truncated:
            if progress is not None:
                progress(f"{learner} seed {seed} step {global_step} episode {episode} return {episode_return:.1f}")
            obs, _ = env.reset()
            episode, episode_return = episode + 1, 0.0
        # ALGO LOGIC: training
        if global_step > learning_starts:
            agent.train(buffer, rng, global_step)
        if progress is not None and eval_every > 0 and global_step % eval_every == 0:
            interim = evaluate(agent.learner.policy().act, "Pendulum-v1", seed=20_000 + seed, episodes=5, rescale=True)
            progress(f"{learner} seed {seed} step {global_step} eval return (5 episodes) {interim:.1f}")
    env.close()
    policy = agent.learner.policy()
    eval_return = evaluate(
        lambda o: policy.act(o),
        "Pendulum-v1",
        seed=10_000 + seed,
        episodes=eval_episodes,
        rescale=True,
    )
    return RunResult(seed, eval_return, time.perf_counter() - start, total_steps)


def cartpole_ppo_config(total_steps: int) -> Any:
    """PPO for CartPole-v1, the SB3 zoo's: n_steps 32 × 8 envs (one 256-row minibatch), 20
    epochs, γ 0.98, λ 0.8, learning rate 1e-3 annealed over ``total_steps``, no entropy bonus,
    64-64 MLPs."""
    from found_rl.algos.ppo import PpoConfig
    from found_rl.models.encoders import NetworkConfig

    return PpoConfig(
        learning_rate=1e-3,
        total_timesteps=total_steps,
        gamma=0.98,
        gae_lambda=0.8,
        update_epochs=20,
        num_minibatches=1,
        ent_coef=0.0,
        network=NetworkConfig(actor_hidden=(64, 64), critic_hidden=(64, 64)),
    )


def train_ppo_cartpole(
    seed: int,
    total_steps: int = 100_000,
    num_envs: int = 8,
    num_steps: int = 32,
    eval_episodes: int = EVAL_EPISODES,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """CleanRL-style PPO loop on CartPole-v1 with gymnasium's sync vector env (SB3 zoo settings)."""
    import gymnasium as gym
    import numpy as np
    import torch

    from found_rl.algos.ppo import PPO
    from found_rl.models.observation import obs_spec_from_space
    from found_rl.models.ppo_nets import action_kind_for_space
    from found_rl.storage.rollout import RolloutStorage

    start = time.perf_counter()
    torch.manual_seed(seed)
    envs = gym.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    envs.action_space.seed(seed)
    spec = obs_spec_from_space(envs.single_observation_space)
    action_kind, action_dim = action_kind_for_space(envs.single_action_space)
    config = cartpole_ppo_config(total_steps)
    ppo = PPO(spec, action_kind, action_dim, config, seed=seed)
    storage = RolloutStorage(num_steps, num_envs, spec, (), discrete=True)
    obs, _ = envs.reset(seed=seed)
    global_step = 0
    valid = torch.ones(num_envs)  # gymnasium resets in place: every row is a real transition
    episode_returns, running = [], np.zeros(num_envs)
    while global_step + num_envs * num_steps <= total_steps:
        storage.reset()
        for _ in range(num_steps):
            obs_tensor = torch.as_tensor(obs, dtype=torch.float32)
            actions, log_probs, values = ppo.step(obs_tensor)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions.numpy())
            global_step += num_envs
            final_values = torch.zeros(num_envs)
            if truncated.any():  # bootstrap from the true final observation, not the reset one
                final_obs = np.stack([infos["final_obs"][i] if truncated[i] else obs[i] for i in range(num_envs)])
                final_values = ppo.value(torch.as_tensor(final_obs, dtype=torch.float32))
            storage.add(
                obs_tensor,
                actions,
                log_probs,
                values,
                torch.as_tensor(rewards, dtype=torch.float32),
                torch.as_tensor(terminated),
                torch.as_tensor(truncated),
                valid,
                final_values,
            )
            obs = next_obs
            running += rewards
            episode_returns += list(running[terminated | truncated])
            running[terminated | truncated] = 0.0
        rollout = ppo.compute_returns(storage, ppo.value(torch.as_tensor(obs, dtype=torch.float32)))
        ppo.update(rollout, global_step)
        if progress is not None and episode_returns:
            progress(
                f"ppo seed {seed} step {global_step} "
                f"mean return (last 20 episodes) {np.mean(episode_returns[-20:]):.1f}"
            )
    envs.close()
    policy = ppo.policy()
    eval_return = evaluate(
        lambda o: int(policy.act(o)),
        "CartPole-v1",
        seed=10_000 + seed,
        episodes=eval_episodes,
    )
    return RunResult(seed, eval_return, time.perf_counter() - start, global_step)


class CarlaLatency:
    """Gymnasium wrapper adding ``bench sampler``'s CARLA-like latency to any env.

    As ``fast_sampler.CarlaLikeEnv``: a step sleeps ``step_latency_s`` × a log-normal factor
    (σ = 0.3, mean 1), a reset sleeps uniform(40, 100) × ``step_latency_s``. Sleeps overlap
    across worker processes the way waiting for CARLA servers does.
    """

    def __new__(cls, env: Any, step_latency_s: float, seed: int = 0) -> Any:
        import gymnasium as gym
        import numpy as np

        class _Latency(gym.Wrapper):
            def __init__(self, inner: Any) -> None:
                super().__init__(inner)
                self._rng = np.random.default_rng(seed)

            def reset(self, **kwargs: Any) -> Any:
                time.sleep(step_latency_s * self._rng.uniform(40.0, 100.0))
                return self.env.reset(**kwargs)

            def step(self, action: Any) -> Any:
                time.sleep(step_latency_s * self._rng.lognormal(-0.5 * 0.3**2, 0.3))
                return self.env.step(action)

        return _Latency(env)


def _latency_cartpole(step_latency_s: float, seed: int) -> Any:
    """Module-level env factory (worker processes build their env from it)."""
    import gymnasium as gym

    return CarlaLatency(gym.make("CartPole-v1"), step_latency_s, seed)


def train_ppo_cartpole_sampled(
    seed: int,
    sampler_kind: str,
    total_steps: int = 100_000,
    num_clips: int = 8,
    rows_per_rollout: int = 256,
    step_latency_s: float = 0.005,
    eval_episodes: int = EVAL_EPISODES,
    progress: Callable[[str], None] | None = None,
    check_every: int = 2_500,
    rho: float = 0.5,
) -> RunResult:
    """PPO on CartPole-v1 with CARLA-like latency, collected by a ``fast_sampler`` sampler, until
    it reaches the target return: the wall time to learn, not to exhaust a budget.

    ``sampler_kind`` 'fast': ``FastSampler`` over ``num_clips`` worker processes (ended fraction
    ``rho`` triggers the global truncation),
    rollouts of ``rows_per_rollout / num_clips`` lock-steps, padding masked by SMPO; 'single':
    ``SingleClipSampler`` (one worker process, reset on done), rollouts of ``rows_per_rollout``
    steps. Both use the CartPole row's PPO settings (learning rate annealed over
    ``total_steps``). Every ``check_every`` valid transitions the policy plays 5 deterministic
    episodes of plain CartPole (no latency, not timed); the run stops when their mean reaches
    ``PPO_TARGET`` or after ``total_steps`` valid transitions, and its result is then a fresh
    ``eval_episodes``-episode evaluation. Training-episode returns are not used to stop: FAST's
    global truncation cuts episodes short on purpose. The wall time excludes worker start-up
    and every evaluation.
    """
    import functools

    import torch

    from fast_sampler import FastSampler, ProcessExecutor, SingleClipSampler
    from found_rl.algos.ppo import PPO
    from found_rl.models.observation import ObsSpec
    from found_rl.models.ppo_nets import ActionKind
    from found_rl.storage.rollout import RolloutStorage

    if sampler_kind not in ("fast", "single"):
        raise ValueError(f"sampler_kind: expected 'fast' or 'single', got {sampler_kind!r}")
    torch.manual_seed(seed)
    clips = num_clips if sampler_kind == "fast" else 1
    num_steps = max(1, rows_per_rollout // clips)
    config = cartpole_ppo_config(total_steps)
    spec = ObsSpec(vector_dim=4)
    ppo = PPO(spec, ActionKind.CATEGORICAL, 2, config, seed=seed)

    def policy(obs: Any) -> Any:
        actions, log_probs, values = ppo.step(torch.as_tensor(obs, dtype=torch.float32))
        return actions.numpy(), {"log_probs": log_probs, "values": values}

    factories = [functools.partial(_latency_cartpole, step_latency_s, 1_000 * seed + clip) for clip in range(clips)]
    executor = ProcessExecutor(factories, timeout_s=300)
    sampler = (
        FastSampler(executor, policy, rho=rho, seed=seed)
        if sampler_kind == "fast"
        else SingleClipSampler(executor, policy, seed=seed)
    )
    storage = RolloutStorage(num_steps, clips, spec, (), discrete=True)
    wall_s, next_check = 0.0, check_every
    with sampler:
        start = time.perf_counter()
        while sampler.stats.valid_transitions < total_steps:
            rollout = sampler.collect(num_steps)
            data = rollout.tensors()
            obs = data["obs"].float()
            next_values = ppo.value(data["next_obs"].float().reshape(-1, 4)).reshape(num_steps, clips)
            storage.reset()
            for t in range(num_steps):
                storage.add(
                    obs[t],
                    data["actions"][t].long(),
                    data["log_probs"][t].float(),
                    data["values"][t].float(),
                    data["rewards"][t].float(),
                    data["terminated"][t],
                    data["truncated"][t],
                    data["valid"][t],
                    final_values=next_values[t],
                )
            samples = ppo.compute_returns(storage, next_values[-1])
            ppo.update(samples, sampler.stats.valid_transitions)
            if sampler.stats.valid_transitions >= next_check:
                next_check += check_every
                wall_s += time.perf_counter() - start
                check = evaluate(_discrete_act(ppo.policy()), "CartPole-v1", seed=30_000 + seed, episodes=5)
                if progress is not None:
                    progress(
                        f"ppo {sampler_kind} seed {seed} valid steps {sampler.stats.valid_transitions} "
                        f"wall {wall_s:.0f} s check return (5 episodes) {check:.1f}"
                    )
                start = time.perf_counter()
                if check >= PPO_TARGET:
                    break
        wall_s += time.perf_counter() - start
        env_steps = sampler.stats.valid_transitions
    eval_return = evaluate(_discrete_act(ppo.policy()), "CartPole-v1", seed=10_000 + seed, episodes=eval_episodes)
    return RunResult(seed, eval_return, wall_s, env_steps)


def _discrete_act(policy: Any) -> Callable[[Any], int]:
    return lambda obs: int(policy.act(obs))


def _summary(results: list[RunResult]) -> dict[str, Any]:
    returns = [r.eval_return for r in results]
    return {
        "mean": statistics.fmean(returns),
        "std": statistics.pstdev(returns) if len(returns) > 1 else 0.0,
        "returns": returns,
        "wall_s": [round(r.wall_s, 1) for r in results],
        "env_steps": results[0].env_steps,
    }


ROWS = ("sac", "drqv2", "ppo", "ppo_fast")


def _row_report(key: str, summary: dict[str, Any], target: float) -> dict[str, Any]:
    return {
        f"{key}_return": summary["mean"],
        f"{key}_return_std": summary["std"],
        f"{key}_returns": summary["returns"],
        f"{key}_wall_s": summary["wall_s"],
        f"{key}_steps": summary["env_steps"],
        f"{key}_target": target,
        f"{key}_target_met": summary["mean"] >= target,
    }


def _run_rows(
    args: argparse.Namespace,
    rows: list[str],
    seeds: list[int],
    steps: tuple[int, int, int, int, float],
    progress: Callable[[str], None] | None,
    done: Callable[[Any], Any],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Train every row for every seed (``done(run)`` after each); the report entries and summaries."""
    sac_steps, drqv2_steps, ppo_steps, fast_steps, step_ms = steps
    report: dict[str, Any] = {}
    summaries: dict[str, dict[str, Any]] = {}
    if "sac" in rows:
        runs = [
            done(train_pendulum("sac", s, sac_steps, min(1_000, sac_steps // 4), args.eval_episodes, progress))
            for s in seeds
        ]
        summaries["sac_pendulum"] = _summary(runs)
        report.update(_row_report("sac_pendulum", summaries["sac_pendulum"], SAC_TARGET))
    if "drqv2" in rows:
        runs = [
            done(train_pendulum("drqv2", s, drqv2_steps, min(1_000, drqv2_steps // 4), args.eval_episodes, progress))
            for s in seeds
        ]
        summaries["drqv2_pendulum"] = _summary(runs)
        report.update(_row_report("drqv2_pendulum", summaries["drqv2_pendulum"], SAC_TARGET))
    if "ppo" in rows:
        runs = [
            done(train_ppo_cartpole(s, ppo_steps, eval_episodes=args.eval_episodes, progress=progress))
            for s in seeds
        ]
        summaries["ppo_cartpole"] = _summary(runs)
        report.update(_row_report("ppo_cartpole", summaries["ppo_cartpole"], PPO_TARGET))
    if "ppo_fast" in rows:
        for kind, key in (("single", "ppo_single_clip_cartpole"), ("fast", "ppo_fast_cartpole")):
            runs = [
                done(
                    train_ppo_cartpole_sampled(
                        s,
                        kind,
                        fast_steps,
                        num_clips=args.fast_clips,
                        step_latency_s=step_ms / 1000.0,
                        rho=args.fast_rho,
                        eval_episodes=args.eval_episodes,
                        progress=progress,
                    )
                )
                for s in seeds
            ]
            summaries[key] = _summary(runs)
            report.update(_row_report(key, summaries[key], PPO_TARGET))
    return report, summaries


def run(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    torch.set_num_threads(args.threads)
    seeds = list(range(args.seeds))
    rows = args.rows or list(ROWS)
    if args.quick:
        sac_steps, drqv2_steps, ppo_steps, fast_steps, step_ms = 3_000, 3_000, 30_000, 5_000, 1.0
    else:
        sac_steps, drqv2_steps, ppo_steps = args.sac_steps, args.drqv2_steps, args.ppo_steps
        fast_steps, step_ms = args.fast_steps, args.fast_step_ms
    # One step per training run: each row per seed (the FAST row trains single-clip and FAST).
    total = len(seeds) * sum(2 if row == "ppo_fast" else 1 for row in rows)
    bar = tqdm(total=total, desc="bench learners", unit="run", disable=None)
    progress = (lambda message: bar.write(message, file=sys.stderr)) if args.verbose else None

    def done(result: Any) -> Any:
        bar.update()
        return result

    steps = (sac_steps, drqv2_steps, ppo_steps, fast_steps, step_ms)
    try:
        report, summaries = _run_rows(args, rows, seeds, steps, progress, done)
    finally:
        bar.close()
    if "ppo_fast" in rows:
        ratio = sum(summaries["ppo_fast_cartpole"]["wall_s"]) / sum(summaries["ppo_single_clip_cartpole"]["wall_s"])
        report.update(
            {
                "ppo_fast_wall_ratio": ratio,
                "ppo_fast_clips": args.fast_clips,
                "ppo_fast_step_ms": step_ms,
                "ppo_fast_rho": args.fast_rho,
                "ppo_fast_target_met": report["ppo_fast_cartpole_target_met"] and ratio < 1.0,
            }
        )
    report.update({"seeds": len(seeds), "quick": bool(args.quick), "torch_threads": args.threads})
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.table import Table

    from found_rl.tables import print_table

    table = Table(title=f"learner parity ({len(seeds)} seed(s){', quick' if args.quick else ''})")
    for column in ("benchmark", "env steps", "mean return", "std", "per seed", "target", "met", "wall s / run"):
        table.add_column(column)
    names = {
        "sac_pendulum": ("SAC Pendulum-v1", SAC_TARGET),
        "drqv2_pendulum": ("DrQ-v2 Pendulum-v1", SAC_TARGET),
        "ppo_cartpole": ("PPO CartPole-v1", PPO_TARGET),
        "ppo_single_clip_cartpole": (f"PPO CartPole-v1 + {step_ms:g} ms latency, single clip", PPO_TARGET),
        "ppo_fast_cartpole": (f"PPO CartPole-v1 + {step_ms:g} ms latency, FAST x{args.fast_clips}", PPO_TARGET),
    }
    for key, summary in summaries.items():
        name, target = names[key]
        table.add_row(
            name,
            str(summary["env_steps"]),
            f"{summary['mean']:.1f}",
            f"{summary['std']:.1f}",
            ", ".join(f"{r:.0f}" for r in summary["returns"]),
            f">= {target:.0f}",
            "yes" if report[f"{key}_target_met"] else "no",
            ", ".join(str(w) for w in summary["wall_s"]),
        )
    print_table(table)
    if "ppo_fast_wall_ratio" in report:
        verdict = "met" if report["ppo_fast_target_met"] else "not met"
        print(
            f"FAST wall time / single-clip wall time: {report['ppo_fast_wall_ratio']:.2f} "
            f"(target: FAST return >= {PPO_TARGET:.0f} in less wall time: {verdict})"
        )
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=ROWS,
        default=None,
        help="rows to run (default: all): sac, drqv2, ppo, ppo_fast",
    )
    parser.add_argument(
        "--seeds",
        type=int_at_least(1),
        default=3,
        help="independent runs per learner (default 3)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short smoke run (SAC and DrQ-v2 3k, PPO 30k, FAST PPO 5k steps at 1 ms); not a parity check",
    )
    parser.add_argument(
        "--sac-steps",
        type=int_at_least(1),
        default=20_000,
        help="SAC env steps (default 20000)",
    )
    parser.add_argument(
        "--drqv2-steps",
        type=int_at_least(1),
        default=20_000,
        help="DrQ-v2 env steps (default 20000)",
    )
    parser.add_argument(
        "--ppo-steps",
        type=int_at_least(1),
        default=100_000,
        help="PPO env steps (default 100000; target: within 200000)",
    )
    parser.add_argument(
        "--fast-steps",
        type=int_at_least(1),
        default=100_000,
        help="valid env steps of each latency PPO run, single clip and FAST (default 100000)",
    )
    parser.add_argument(
        "--fast-step-ms",
        type=finite_float(0.0, inclusive=False),
        default=5.0,
        help="mean step latency (ms) of the latency CartPole; a reset takes 40-100 steps' time (default 5)",
    )
    parser.add_argument(
        "--fast-clips",
        type=int_at_least(2),
        default=8,
        help="FAST clips (worker processes) of the latency PPO row (default 8)",
    )
    parser.add_argument(
        "--fast-rho",
        type=finite_float(0.0, inclusive=False, maximum=1.0),
        default=0.5,
        help="FAST's ended fraction that triggers the global truncation, in (0, 1] (default 0.5, METHOD §4)",
    )
    parser.add_argument(
        "--eval-episodes",
        type=int_at_least(1),
        default=EVAL_EPISODES,
        help="deterministic evaluation episodes per run",
    )
    parser.add_argument("--verbose", action="store_true", help="print training progress to stderr")
    parser.add_argument("--threads", type=int_at_least(1), default=1, help="torch CPU threads (default 1)")
    parser.set_defaults(run=run)
