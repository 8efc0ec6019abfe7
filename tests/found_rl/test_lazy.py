import subprocess
import sys
import textwrap

import pytest


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``lazy_pkg`` whose ``VALUE`` lives in a submodule that records being imported."""
    root = tmp_path / "lazy_pkg"
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent("""
        from found_rl.lazy import lazy_attributes

        EAGER = 1
        __getattr__, __dir__ = lazy_attributes(__name__, {"VALUE": "heavy"})
    """))
    (root / "heavy.py").write_text("VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("lazy_pkg", "lazy_pkg.heavy"):
        sys.modules.pop(name, None)


def test_a_lazy_name_imports_its_submodule_on_first_use_only(package):
    import lazy_pkg

    assert "lazy_pkg.heavy" not in sys.modules
    assert {"EAGER", "VALUE"} <= set(dir(lazy_pkg))
    assert lazy_pkg.VALUE == 3 and "lazy_pkg.heavy" in sys.modules
    assert vars(lazy_pkg)["VALUE"] == 3  # kept: the next lookup is a plain attribute


def test_an_unknown_name_is_an_attribute_error_naming_package_and_name(package):
    import lazy_pkg

    with pytest.raises(AttributeError, match="module 'lazy_pkg' has no attribute 'VALEU'"):
        _ = lazy_pkg.VALEU
    assert not hasattr(lazy_pkg, "heavy_thing")


def test_reading_the_run_config_module_loads_neither_the_loop_nor_the_learners():
    script = (
        "import sys, found_rl.train.config, found_rl.algos.registry\n"
        "import found_rl.algos as algos, found_rl.train as train\n"
        "print(' '.join(sorted(sys.modules)))\n"
        "assert train.RunConfig is found_rl.train.config.RunConfig and 'vmr_loss' in dir(algos)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert not {"found_rl.train.loop", "found_rl.algos.sac", "found_rl.algos.ppo", "torch"} & loaded
