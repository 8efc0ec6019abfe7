"""fast_sampler and vlm_server must stay usable without found_rl (ARCHITECTURE §1)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", ["fast_sampler", "vlm_server"])
def test_package_never_imports_found_rl(package: str) -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        if "found_rl" in imported_top_levels(path)
    ]
    assert offenders == [], f"{package} must not import found_rl: {offenders}"
