"""Validation shared by the learners' config dataclasses: one message shape, naming the field.

Every learner config refuses, naming ``<Config>.<field>``: a float that is NaN or infinite, a
value outside its range, a schedule whose end lies before its start, and a guidance field that
does not hold its settings type. The guidance settings check their own values
(``found_rl.guidance_settings``); which learner accepts which term is the registry's
(``found_rl.algos.registry``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

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


def check_settings(config: object, **types: type) -> None:
    """Refuse a guidance field that does not hold its settings type (a dict or a term list
    would otherwise reach the update), naming the field and the type to pass.

    Raises:
        TypeError: e.g. ``SacConfig.vmr: expected a Vmr (found_rl.guidance_settings), got dict``.
    """
    for field_name, expected in types.items():
        value = getattr(config, field_name)
        if not isinstance(value, expected):
            raise TypeError(
                f"{type(config).__name__}.{field_name}: expected a {expected.__name__} "
                f"(found_rl.guidance_settings), got {type(value).__name__}"
            )
