"""The learners a run can name, one entry each: what the training code needs to know of a learner.

An entry says which storage the learner learns from (a replay buffer or a rollout), which
guidance terms it accepts, and where its module is. The module provides the rest under fixed
names, read when first needed (so reading a run config imports no learner, and no torch):

- ``CONFIG``: its hyper-parameter dataclass;
- ``TAGS``: every TensorBoard tag its ``update`` may return; ``ACTOR_STEP_TAGS``: those it returns
  only on (possibly delayed) actor steps;
- ``make(obs_spec, action_dim, config, device, seed)``: the learner;
- ``config_from_run(learner, guidance, network, env_steps)``: its config from a run config's
  ``learner`` section (read by field name), its ``guidance`` settings (handed on, never copied),
  the network preset and the env-step budget.

Adding a learner is its module plus one line in :data:`LEARNERS`.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from enum import Enum
from types import ModuleType
from typing import Any

from found_rl.guidance_settings import TERM_NEEDS, Guidance, GuidanceTerm


class Storage(str, Enum):
    """What a learner learns from."""

    REPLAY = "replay"
    """off-policy: ``found_rl.storage.replay.ReplayBuffer``"""
    ROLLOUT = "rollout"
    """on-policy: ``found_rl.storage.rollout.RolloutStorage``"""


@dataclass(frozen=True)
class LearnerEntry:
    """One learner as the training code sees it."""

    name: str
    """what a run config's ``algorithm`` names"""
    module: str
    """the learner's module (``CONFIG``, ``TAGS``, ``ACTOR_STEP_TAGS``, ``make``, ``config_from_run``)"""
    storage: Storage
    guidance: tuple[GuidanceTerm, ...]
    """the guidance terms it accepts; a run config enabling another is refused"""
    own_defaults: tuple[GuidanceTerm, ...] = ()
    """accepted terms whose unset fields take the learner's defaults (its config's field default)
    instead of METHOD's (``found_rl.guidance_settings``)"""
    refused_switches: tuple[tuple[str, str], ...] = ()
    """``(term.field, why)``: boolean settings of an accepted term that mean nothing to this learner;
    a run config that switches one on is refused"""

    @property
    def on_policy(self) -> bool:
        return self.storage is Storage.ROLLOUT

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    @property
    def config_class(self) -> type:
        return self.load().CONFIG

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(self.load().TAGS)

    @property
    def actor_step_tags(self) -> frozenset[str]:
        return frozenset(self.load().ACTOR_STEP_TAGS)

    def make(self, obs_spec: Any, action_dim: int, config: Any, device: Any, seed: int) -> Any:
        return self.load().make(obs_spec, action_dim, config, device, seed)

    def config_from_run(self, learner: Any, guidance: Guidance, network: Any, env_steps: int | None) -> Any:
        return self.load().config_from_run(learner, guidance, network, env_steps)

    def guidance_defaults(self) -> dict[str, Any]:
        """The settings of each :attr:`own_defaults` term, by its key under ``guidance:``."""
        if not self.own_defaults:
            return {}
        fields = {item.name: item for item in dataclasses.fields(self.config_class)}
        defaults = {}
        for term in self.own_defaults:
            item = fields[term.value]
            defaults[term.value] = item.default_factory() if item.default is dataclasses.MISSING else item.default
        return defaults

    def check_guidance(self, guidance: Guidance) -> None:
        """Refuse a switched-on term this learner does not accept, naming it, why, and the allowed ones.

        Raises:
            ValueError: e.g. ``guidance.vmr: ppo does not accept it (VMR is a margin between Q
                values and needs a Q-learning critic); ppo accepts: clip_bonus, advisor_bc``.
        """
        for term in guidance.enabled_terms:
            if term not in self.guidance:
                allowed = ", ".join(t.value for t in self.guidance) or "no guidance"
                raise ValueError(
                    f"guidance.{term.value}: {self.name} does not accept it ({TERM_NEEDS[term]}); "
                    f"{self.name} accepts: {allowed} (set guidance.{term.value}.enabled: false)"
                )
        for dotted, why in self.refused_switches:
            term, field = dotted.split(".")
            if getattr(getattr(guidance, term), field):
                raise ValueError(f"guidance.{dotted}: {self.name} does not accept it ({why}); set false")


LEARNERS: dict[str, LearnerEntry] = {
    entry.name: entry
    for entry in (
        LearnerEntry("sac", "found_rl.algos.sac", Storage.REPLAY,
                     (GuidanceTerm.VMR, GuidanceTerm.AWAG, GuidanceTerm.CLIP_BONUS)),
        LearnerEntry("drqv2", "found_rl.algos.drqv2", Storage.REPLAY,
                     (GuidanceTerm.VMR, GuidanceTerm.AWAG, GuidanceTerm.CLIP_BONUS), own_defaults=(GuidanceTerm.AWAG,),
                     refused_switches=(("awag.detach_std", "its std is a schedule, not learned"),)),
        LearnerEntry("ppo", "found_rl.algos.ppo", Storage.ROLLOUT, (GuidanceTerm.CLIP_BONUS, GuidanceTerm.ADVISOR_BC)),
    )
}
"""Every learner, by the name a run config gives it"""


def learner_entry(name: str) -> LearnerEntry:
    """The entry of learner ``name``.

    Raises:
        ValueError: naming the unknown learner and the allowed ones.
    """
    entry = LEARNERS.get(name) if isinstance(name, str) else None
    if entry is None:
        names = [repr(known) for known in LEARNERS]
        allowed = ", ".join(names[:-1]) + f" or {names[-1]}"
        raise ValueError(f"expected one of {allowed}, got {name!r}")
    return entry
