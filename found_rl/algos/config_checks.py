"""Validation shared by the learners' config dataclasses: one message shape, naming the field.

Every learner config refuses, naming ``<Config>.<field>``: a float that is NaN or infinite, a
value outside its range, a schedule whose end lies before its start, and a guidance term its
algorithm cannot use (naming the term and the algorithm).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from found_rl.algos.guidance import GuidanceTerm

Rule = tuple[str, bool, str]
"""(field name, the check passed, what was expected)"""


def check_finite_floats(config: object) -> None:
    """Refuse NaN and infinite values in every float field of a config dataclass.

    A comparison such as ``coef >= 0`` lets ``inf`` through and an inf coefficient turns every
    loss into inf or NaN many steps later; this catches it when the config is built.

    Raises:
        ValueError: naming the first non-finite field.
    """
    name = type(config).__name__
    for item in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, item.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}.{item.name}: expected a finite number, got {value!r}")


def check_rules(config: object, rules: Iterable[Rule]) -> None:
    """Raise on the first failed rule: ``ValueError("<Config>.<field>: expected ..., got ...")``."""
    name = type(config).__name__
    for field_name, ok, allowed in rules:
        if not ok:
            raise ValueError(f"{name}.{field_name}: expected {allowed}, got {getattr(config, field_name)!r}")


def check_schedule(config: object, start_field: str, end_field: str) -> None:
    """Refuse a schedule whose end step lies before its start step, naming the end field."""
    start, end = getattr(config, start_field), getattr(config, end_field)
    if start < 0:
        raise ValueError(f"{type(config).__name__}.{start_field}: expected an env step >= 0, got {start!r}")
    if end < start:
        raise ValueError(
            f"{type(config).__name__}.{end_field}: the schedule ends ({end}) before it starts "
            f"({start_field} = {start}); expected {end_field} >= {start_field}"
        )


def check_guidance(config: object, algorithm: str, supported: Iterable[GuidanceTerm]) -> None:
    """Refuse unknown guidance terms and terms ``algorithm`` cannot use, naming both.

    Raises:
        ValueError: e.g. ``PpoConfig.guidance: 'vmr' cannot be used by ppo (VMR needs a Q
            function); ppo supports: clip_bonus, advisor_bc``.
    """
    supported = tuple(supported)
    guidance = config.guidance  # type: ignore[attr-defined]
    if isinstance(guidance, str):
        raise ValueError(
            f"{type(config).__name__}.guidance: expected a list of term names, got the string {guidance!r}"
        )
    for term_name in guidance:
        term = GuidanceTerm.parse(term_name)
        if term not in supported:
            allowed = ", ".join(t.value for t in supported)
            raise ValueError(
                f"{type(config).__name__}.guidance: {term_name!r} cannot be used by {algorithm} "
                f"({GUIDANCE_NEEDS[term]}); {algorithm} supports: {allowed}"
            )


GUIDANCE_NEEDS = {
    GuidanceTerm.VMR: "VMR is a margin between Q values and needs a Q-learning critic",
    GuidanceTerm.AWAG: "AWAG weighs the advisor action by a Q advantage and needs a Q-learning critic; "
    "PPO's counterpart is 'advisor_bc'",
    GuidanceTerm.CLIP_BONUS: "it has no TD or GAE reward to add the bonus to",
    GuidanceTerm.ADVISOR_BC: "'advisor_bc' is PPO's advantage-gated advisor term; Q-learning learners use 'awag'",
}
