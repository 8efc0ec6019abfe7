"""Who may import whom (ARCHITECTURE §1, docs/architecture.md §1), read from every module's imports.

- ``fast_sampler`` and ``vlm_server`` never import ``found_rl``: each is useful on its own;
- inside ``found_rl`` every package sits on a level (:data:`LEVELS`, the table of
  docs/architecture.md) and imports only its own level and below: no upward import
  (maps/routes → sim, sim → env, bev → bench, ...);
- the runtime never imports the tests (hand-built scenes live in ``tests/scenes.py``).

Imports are parsed with ``ast``, lazy ones inside functions and ``TYPE_CHECKING`` blocks included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "found_rl"
ROOT_UNIT = "found_rl"
"""The package's own ``__init__`` (``from found_rl import DRIVING_ENV_ID``)."""

LEVELS: dict[str, int] = {
    **dict.fromkeys(("cli", "bench", "__main__"), 9),
    "train": 8,
    **dict.fromkeys(("algos", "evaluation", "clip", "vlm"), 7),
    **dict.fromkeys(("env", "advisors", "dataset", "storage", "checkpoint"), 6),
    **dict.fromkeys(("bev", "hazards", "infractions", "rewards", "state_vector", "expert", "models"), 5),
    "sim": 4,
    "maps": 3,
    "routes": 2,
    "world": 1,
    **dict.fromkeys(
        (ROOT_UNIT, "actions", "argtypes", "atomic", "boxes", "devices", "errors", "events", "guidance_settings", "jit",
         "lazy", "metrics", "package_files", "scenario", "tables"),
        0,
    ),
}
"""Level of each top-level package or module of ``found_rl``; higher levels build on lower ones."""

NAMED_IN_ISSUE_24 = [("maps", "sim"), ("routes", "sim"), ("sim", "env"), ("bev", "bench")]
"""The upward imports issue 24 removed; the level table forbids them, these name them."""

LOOPS_THE_GRAPH_CANNOT_SEE = [("bench", "cli")]
"""Imports the levels allow but that close a loop: ``cli/bench.py`` loads each ``bench.<name>`` by
name (``importlib``), so a benchmark that imported the CLI (its argument types, say) would make
the two depend on each other. What both need lives below them (``found_rl.argtypes``)."""


def imported_modules(source: str, package: str = "") -> set[str]:
    """Absolute names of every module ``source`` imports (``from a import b`` gives ``a`` and
    ``a.b``, since ``b`` may be a module); relative imports resolve against ``package``, the
    dotted package the source file lies in."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def unit_of(module: str) -> str | None:
    """The top-level ``found_rl`` package or module a dotted name belongs to (None: not ours)."""
    parts = module.split(".")
    if parts[0] != "found_rl":
        return None
    if len(parts) == 1:
        return ROOT_UNIT
    is_submodule = (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file()
    return parts[1] if is_submodule else ROOT_UNIT  # ``from found_rl import DRIVING_ENV_ID``


def module_name(path: Path) -> str:
    """Dotted name of a source file (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    """The dotted package a source file's relative imports start from."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(path: Path) -> set[str]:
    return imported_modules(path.read_text(), package_of(path))


def found_rl_imports() -> dict[Path, set[str]]:
    """Every ``found_rl`` source file and the ``found_rl`` units it imports (its own excluded)."""
    result: dict[Path, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        units = {unit_of(m) for m in imports_of(path)}
        result[path] = {u for u in units if u is not None and u != unit_of(module_name(path))}
    return result


def test_imports_are_read_with_their_unit():
    source = (
        "from found_rl import hazards, DRIVING_ENV_ID\nimport found_rl.sim.backend\n"
        "def lazy():\n    from found_rl.bench.load import numpy_call_us\n"
        "from . import layers\nfrom ..world import Route\n"
    )
    units = {unit_of(m) for m in imported_modules(source, "found_rl.bev")} - {None}
    assert units == {"hazards", ROOT_UNIT, "sim", "bench", "bev", "world"}


def test_every_found_rl_package_has_a_level():
    units = {unit_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert len(units) > 20
    missing = sorted(units - set(LEVELS))
    assert missing == [], f"give these a level in LEVELS and in docs/architecture.md §1: {missing}"
    assert sorted(set(LEVELS) - units) == [], "LEVELS names a package that no longer exists"


def test_no_import_runs_upward():
    upward = [
        f"{path.relative_to(ROOT)} (level {LEVELS[unit_of(module_name(path))]}) imports found_rl.{unit} "
        f"(level {LEVELS[unit]})"
        for path, units in found_rl_imports().items()
        for unit in sorted(units)
        if LEVELS.get(unit, -1) > LEVELS.get(unit_of(module_name(path)), len(LEVELS))  # unknown: the test above
    ]
    assert upward == [], "upward imports:\n" + "\n".join(upward)


@pytest.mark.parametrize(("lower", "higher"), NAMED_IN_ISSUE_24)
def test_lower_package_never_imports_higher(lower: str, higher: str):
    offenders = [
        str(path.relative_to(ROOT))
        for path, units in found_rl_imports().items()
        if unit_of(module_name(path)) == lower and higher in units
    ]
    assert offenders == [], f"found_rl.{lower} must not import found_rl.{higher}: {offenders}"


@pytest.mark.parametrize(("importer", "imported"), LOOPS_THE_GRAPH_CANNOT_SEE)
def test_package_never_imports_the_one_that_loads_it_by_name(importer: str, imported: str):
    offenders = [
        str(path.relative_to(ROOT))
        for path, units in found_rl_imports().items()
        if unit_of(module_name(path)) == importer and imported in units
    ]
    assert offenders == [], f"found_rl.{importer} must not import found_rl.{imported}: {offenders}"


def test_world_imports_nothing_of_found_rl_but_actions():
    world = {u for path, units in found_rl_imports().items() if unit_of(module_name(path)) == "world" for u in units}
    assert world <= {"actions"}, world


def test_runtime_never_imports_tests():
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(m.split(".")[0] == "tests" for m in imports_of(path))
    ]
    assert offenders == [], f"found_rl must not import tests/: {offenders}"


def test_architecture_page_shows_the_levels():
    """The level table of docs/architecture.md §1 lists exactly :data:`LEVELS`."""
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", (ROOT / "docs" / "architecture.md").read_text(), re.MULTILINE)
    documented = {name: int(level) for level, names in rows for name in re.findall(r"`([\w.]+)`", names)}
    assert documented == LEVELS


@pytest.mark.parametrize("package", ["fast_sampler", "vlm_server"])
def test_package_never_imports_found_rl(package: str) -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        if any(m.split(".")[0] == "found_rl" for m in imports_of(path))
    ]
    assert offenders == [], f"{package} must not import found_rl: {offenders}"
