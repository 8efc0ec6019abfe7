"""Lazy attributes of a package (PEP 562): a name is imported from its submodule on first use.

A package whose ``__init__`` re-exports from heavy submodules (torch, the learners) would make
every import of a light sibling pay for them; ``import found_rl.train.config`` runs the
package's ``__init__`` first. One table of name -> submodule replaces the eager imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` that import each name in ``homes`` on first use.

    Use as ``__getattr__, __dir__ = lazy_attributes(__name__, {"Trainer": "loop"})``.

    Args:
        package: the package's ``__name__``.
        homes: attribute name -> the submodule defining it, relative to ``package`` (``"loop"``).

    Returns:
        ``__getattr__``, which imports the name's submodule and keeps the value in the package
        (the next lookup is a plain attribute), and ``__dir__``, which lists the lazy names too.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
