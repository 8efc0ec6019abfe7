"""``package://NAME/PATH``: a file inside an installed Python package, named without copying it.

The ``eclipse-sumo`` wheel ships real-world networks (OpenStreetMap imports, hand-built city
junctions) under its ``sumo`` package; a scenario names one as
``package://sumo/tools/game/fkk_in/ingolstadt.net.xml.gz`` and it is found wherever the package
is installed, so a scenario file travels between machines and nothing is redistributed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path, PurePosixPath

SCHEME = "package://"


def is_package_path(text: str | Path) -> bool:
    """Whether ``text`` names a file inside an installed package (``package://NAME/PATH``)."""
    return str(text).startswith(SCHEME)


def package_root(name: str) -> Path:
    """The folder of the installed package ``name`` (its import name, e.g. ``sumo``).

    Raises:
        ValueError: no such package is installed, or it is a single module, not a folder.
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"no installed Python package {name!r} to read it from{_install_hint(name)}")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_package_path(text: str | Path) -> Path:
    """The file ``package://NAME/PATH`` names, checked to exist.

    Raises:
        ValueError: the text is malformed, the package is not installed, or the package holds
            no such file (the message names the package's folder and version).
    """
    text = str(text)
    name, _, inner = text.removeprefix(SCHEME).partition("/")
    relative = PurePosixPath(inner)
    if not name or not inner or relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{text!r}: expected {SCHEME}PACKAGE/PATH inside the package, e.g. "
                         f"{SCHEME}sumo/tools/game/fkk_in/ingolstadt.net.xml.gz")
    try:
        root = package_root(name)
    except ValueError as exc:
        raise ValueError(f"{text}: {exc}") from None
    path = root.joinpath(*relative.parts)
    if not path.is_file():
        raise ValueError(f"{text}: the installed package {name}{_version(name)} at {root} has no file {inner}; "
                         "another version may have moved or dropped it")
    return path.resolve()


def _version(name: str) -> str:
    """`` (<distribution> <version>)`` that installs import package ``name``, or ``""``."""
    distributions = importlib.metadata.packages_distributions().get(name, [])
    for distribution in distributions:
        try:
            return f" ({distribution} {importlib.metadata.version(distribution)})"
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def _install_hint(name: str) -> str:
    return " (pip install eclipse-sumo)" if name == "sumo" else ""
