"""Model backends of the advisor server and the plug-in contract they implement.

Backends are plugged in by import path (``"module:Class"``) or a short alias, so
``vlm_server`` never imports the packages that provide them (e.g. ``found_rl.advisors``).
"""

from vlm_server.backends.base import (
    AdviseItem,
    AdviseResult,
    AdvisorBackend,
    ClipItem,
    ClipResult,
    ClipScorerBackend,
    load_backend,
)

__all__ = [
    "AdviseItem",
    "AdviseResult",
    "AdvisorBackend",
    "ClipItem",
    "ClipResult",
    "ClipScorerBackend",
    "load_backend",
]
