"""The privileged expert as an advisor plug-in of ``vlm_server`` (``found_rl.advisors:ExpertAdvisor``).

The env side computes an :class:`~found_rl.expert.ExpertObservation` next to the simulator and
sends ``observation.to_dict()`` as the request's ``state``; the server runs the memoryless
expert controller on each item. No image is needed. Serve it with the backend alias
``expert`` (``vlm_server.backends.base.BACKEND_ALIASES``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from found_rl.expert.control import ExpertConfig, expert_action
from found_rl.expert.observation import ExpertObservation
from vlm_server.backends.base import AdviseItem, AdviseResult


class ExpertAdvisor:
    """Answers advise requests with the expert's action for the request's privileged state.

    Args:
        **options: any :class:`~found_rl.expert.ExpertConfig` field (e.g.
            ``cruise_speed_mps=6.0``), from the server config.

    Raises:
        ValueError: on an option that is not an ``ExpertConfig`` field.
    """

    def __init__(self, **options: Any) -> None:
        allowed = {f.name for f in fields(ExpertConfig)}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ValueError(f"ExpertAdvisor: unknown options {unknown}; allowed: {sorted(allowed)}")
        self.config = ExpertConfig(**options)

    def load(self) -> None:
        """Nothing to load: the expert is a few lines of geometry."""

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        return [self._advise(item) for item in items]

    def _advise(self, item: AdviseItem) -> AdviseResult:
        if item.state is None:
            return AdviseResult(
                action=None,
                error="expert advisor needs the privileged 'state' (ExpertObservation.to_dict())",
            )
        try:
            observation = ExpertObservation.from_dict(item.state)
        except ValueError as exc:
            return AdviseResult(action=None, error=str(exc))
        return AdviseResult(action=expert_action(observation, self.config))
