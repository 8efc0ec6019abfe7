"""Kernels compile once, for their one signature, with or without a writable cache folder."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from found_rl.jit import kernel
from found_rl.routes.progress import project_onto_segments

REPO = Path(__file__).resolve().parents[2]


def test_a_kernel_never_compiles_again_for_other_types():
    assert len(project_onto_segments.signatures) == 1
    start, direction, length = np.zeros((2, 2)), np.array([[1.0, 0.0], [1.0, 0.0]]), np.ones(2)
    project_onto_segments(start, direction, length, 0.5, 0.5, 0, 2, 1.0)
    with pytest.raises(TypeError):  # float32 points: numba refuses rather than compiling anew
        project_onto_segments(start.astype(np.float32), direction, length, 0.5, 0.5, 0, 2, 1.0)
    assert len(project_onto_segments.signatures) == 1


def test_without_a_writable_cache_folder_kernels_compile_silently():
    code = """
import warnings
warnings.simplefilter("error")
import numba.core.caching as caching
caching.CacheImpl._locator_classes = []  # as if neither the source nor the user cache folder were writable
from found_rl.jit import kernel

@kernel("float64(float64)")
def double(x):
    return 2.0 * x

print(double(2.0))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4.0" and result.stderr == ""


def test_a_read_only_install_caches_in_the_user_cache_folder(tmp_path):
    # The source folder unwritable (as for a package installed by root): numba's next locator
    # is the user-wide cache folder, under XDG_CACHE_HOME.
    module = tmp_path / "kernels_here.py"
    module.write_text(
        "from found_rl.jit import kernel\n\n@kernel('float64(float64)')\ndef triple(x):\n    return 3.0 * x\n"
    )
    code = f"""
import sys, warnings
warnings.simplefilter("error")
import numba.core.caching as caching
caching.CacheImpl._locator_classes = [caching.UserWideCacheLocator]
sys.path.insert(0, {str(tmp_path)!r})
import kernels_here
print(kernels_here.triple(2.0))
"""
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    for _ in range(2):  # the second run loads what the first wrote
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environment
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "6.0" and result.stderr == ""
    assert list((tmp_path / "cache" / "numba").rglob("*.nbi"))  # the index of the cached kernel
    assert not list(tmp_path.glob("__pycache__/*.nbi"))


def test_a_kernel_with_a_cache_compiles_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @kernel("int64(int64)")
        def increment(x):
            return x + 1

    assert increment(1) == 2
