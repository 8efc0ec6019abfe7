"""Parsers of the text a user writes: bounded numbers for argparse, enum members by value.

``int_at_least`` and ``finite_float`` are argparse ``type=`` callables: a bad value then fails
while parsing, as ``found-rl <command>: error: argument --flag: ...`` with exit 2, before any
simulator, server or benchmark starts. NaN and infinity are refused: a NaN compares false with
every bound (so it slips through ``<`` checks) and an infinite duration never ends.
``enum_member`` gives every closed set named by string (a guidance term, PPO's action kind)
the same error, naming the field and the allowed values.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An int ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {value}")
        return value

    return parse


def finite_float(minimum: float, *, inclusive: bool, maximum: float = math.inf) -> Callable[[str], float]:
    """A finite float ``>= minimum`` (``inclusive``) or ``> minimum``, and ``<= maximum``."""
    bound = f"{'>=' if inclusive else '>'} {minimum:g}" + (f" and <= {maximum:g}" if maximum < math.inf else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number {bound}, got {text!r}") from None
        too_low = value < minimum or (value == minimum and not inclusive)
        if not math.isfinite(value) or too_low or value > maximum:
            raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
        return value

    return parse


SEED = int_at_least(0)
"""Seeds: numpy's ``SeedSequence`` and gymnasium's ``reset(seed=...)`` refuse negative ones."""


def enum_member(enum: type[E], text: str, where: str, noun: str) -> E:
    """The member of ``enum`` whose value is ``text``: one message for every closed set named by string.

    Args:
        enum: the closed set (``GuidanceTerm``, ``ActionKind``).
        text: what the user wrote.
        where: the field or flag it came from, first in the message (``guidance``).
        noun: what a member is (``term``).

    Raises:
        ValueError: ``"<where>: unknown <noun> 'x'; allowed: a, b"``.
    """
    try:
        return enum(text)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in enum)
        raise ValueError(f"{where}: unknown {noun} {text!r}; allowed: {allowed}") from None
