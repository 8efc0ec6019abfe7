"""Agents ``found-rl eval`` can drive: ``expert``, ``checkpoint:PATH``, ``advisor:URL``, and the
reference policies ``still`` (standing still) and ``throttle`` (constant throttle, zero steer)
that show whether a policy drives or only moves.

Every agent sees the same observation and snapshot and returns one ``(acc, steer)`` action;
termination is the env's business, so the rules are the same for all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from found_rl.errors import MissingPathError, UserError
from found_rl.expert import ExpertDriver
from found_rl.state_vector import ROACH_STATE_SIZE, ROUTE_POINT_NAMES, STATE_SIZE
from found_rl.world import WorldSnapshot

if TYPE_CHECKING:
    from found_rl.env import ObservationKind

AGENT_SPECS = ("expert", "still", "throttle", "checkpoint:PATH", "advisor:URL")


class Agent(Protocol):
    """A driver for evaluation."""

    name: str
    observation: ObservationKind
    """What the agent reads besides the snapshot: ``"bev"`` or ``"state"`` (no BEV is rendered)."""

    def reset(self) -> None:
        """Forget the previous episode."""

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray:
        """``(2,)`` float32 ``(acc, steer)`` for this step."""

    def close(self) -> None:
        """Release connections or models."""


class ExpertAgent:
    """The privileged expert (reads only the snapshot)."""

    name = "expert"
    observation: ObservationKind = "state"

    def __init__(self) -> None:
        self.driver = ExpertDriver()

    def reset(self) -> None:
        self.driver.reset()

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray:
        return self.driver.act(snapshot)

    def close(self) -> None:
        pass


class ConstantAgent:
    """A fixed ``(acc, steer)`` on every step: the floor a trained policy must clear."""

    observation: ObservationKind = "state"

    def __init__(self, name: str, acc: float, steer: float = 0.0) -> None:
        self.name = name
        self._action = np.array([acc, steer], dtype=np.float32)

    def reset(self) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray:
        return self._action.copy()

    def close(self) -> None:
        pass


CONSTANT_AGENTS = {"still": 0.0, "throttle": 1.0}
"""Reference policies by name: the constant acc they apply with zero steer."""


class CheckpointAgent:
    """A trained policy, acting deterministically on the observation only; messages name ``flag``."""

    observation: ObservationKind = "bev"

    def __init__(self, path: str, device: str = "cpu", flag: str = "--agent") -> None:
        from found_rl.checkpoint import load_policy
        from found_rl.devices import resolve_device

        checkpoint = Path(path)
        if not checkpoint.is_file():
            raise MissingPathError(f"{flag} checkpoint:{path}: no such checkpoint file")
        resolved = resolve_device(device)  # before the checkpoint loads
        self.name = f"checkpoint:{path}"
        self.flag = flag
        self.policy = load_policy(checkpoint, device=resolved)

    def bev_config(self) -> Any:
        """The renderer settings the policy was trained with: the default BEV, max-pooled to the
        policy's input size (the ``cpu`` preset reads 48 × 48, the ``roach`` one 96 × 96)."""
        from found_rl.bev import BevConfig

        default = BevConfig()
        shape = self.policy.spec.obs.bev_shape
        if shape is None or default.size_px % shape[-1]:
            return default
        return BevConfig(pool=default.size_px // shape[-1])

    def check_observation_space(self, space: Any) -> None:
        """Refuse an env whose observations the policy was not built for, before the first episode.

        Raises:
            ValueError: naming the checkpoint and both shapes.
        """
        want = self.policy.spec.obs
        got_bev, got_state = tuple(space["bev"].shape), int(space["state"].shape[0])
        if want.bev_shape is not None and (tuple(want.bev_shape), want.state_dim) != (got_bev, got_state):
            hint = ""
            if want.state_dim == ROACH_STATE_SIZE and got_state == STATE_SIZE:
                hint = (f"; the policy reads the {ROACH_STATE_SIZE}-number state of found-rl before the route "
                        f"points joined it ({', '.join(ROUTE_POINT_NAMES[:2])}, ...): retrain it")
            raise UserError(
                f"{self.flag} {self.name}: the policy was built for bev {tuple(want.bev_shape)} and state "
                f"({want.state_dim},), but this scenario gives bev {got_bev} and state ({got_state},){hint}"
            )

    def reset(self) -> None:
        reset = getattr(self.policy, "reset", None)
        if callable(reset):
            reset()

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray:
        return np.asarray(self.policy.act(obs, deterministic=True), dtype=np.float32).reshape(2)

    def close(self) -> None:
        pass


def parse_agent_spec(spec: str) -> tuple[str, str]:
    """Split ``expert`` / ``checkpoint:PATH`` / ``advisor:URL`` into ``(kind, argument)``.

    Raises:
        ValueError: for anything else (names the spec and the allowed forms).
    """
    kind, _, argument = spec.partition(":")
    if spec == "expert" or spec in CONSTANT_AGENTS or (kind in ("checkpoint", "advisor") and argument):
        return kind, argument
    raise UserError(f"--agent: unknown agent {spec!r}; expected one of {', '.join(AGENT_SPECS)}")


def make_agent(spec: str, *, device: str = "cpu", advisor_timeout_s: float = 10.0, flag: str = "--agent") -> Any:
    """Build the agent named by ``spec`` (``flag``, the option that named it, is in its messages).

    Raises:
        ValueError: for an unknown spec or an unreachable advisor.
        FileNotFoundError: for a missing checkpoint.
    """
    kind, argument = parse_agent_spec(spec)
    if kind == "checkpoint":
        return CheckpointAgent(argument, device=device, flag=flag)
    if kind == "advisor":
        from found_rl.evaluation.advisor_agent import AdvisorAgent

        return AdvisorAgent(argument, timeout_s=advisor_timeout_s, flag=flag)
    if kind in CONSTANT_AGENTS:
        return ConstantAgent(kind, CONSTANT_AGENTS[kind])
    return ExpertAgent()
