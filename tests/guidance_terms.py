"""Guidance terms switched on in a learner config, for tests: ``SacConfig(**switched_on(SacConfig, "vmr"))``.

Each term keeps the learner's own defaults (DrQ-v2's AWAG schedule is not SAC's), as a run config does.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def switched_on(config_class: type, *names: str, **fields: Any) -> dict[str, Any]:
    """``{name: the config's default settings of that term, enabled}``; ``fields`` (``awag={"coef": 0.5}``)
    replace settings of a term."""
    defaults = {item.name: item for item in dataclasses.fields(config_class)}
    settings = {}
    for name in {*names, *fields}:
        item = defaults[name]
        default = item.default_factory() if item.default is dataclasses.MISSING else item.default
        changes = {"enabled": name in names, **fields.get(name, {})}
        settings[name] = type(default).model_validate({**default.model_dump(), **changes})
    return settings
