"""Suite-wide pytest setup.

- torch runs on one thread so the suite behaves on 2-core CI.
- Signal handlers a test changes must be restored by it.
- Networks compiled by the tests go to a per-session cache, never the user's.
"""

import os

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def network_cache(tmp_path_factory: pytest.TempPathFactory):
    """One cache for the whole run, shared by its xdist workers: a network one worker built is not
    built again by the other (builds are renamed into place, so concurrent builders are safe)."""
    previous = os.environ.get("FOUND_RL_CACHE")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = shared / "found-rl-cache"
    cache.mkdir(exist_ok=True)
    os.environ["FOUND_RL_CACHE"] = str(cache)
    yield
    if previous is None:
        os.environ.pop("FOUND_RL_CACHE", None)
    else:
        os.environ["FOUND_RL_CACHE"] = previous


@pytest.fixture(autouse=True)
def signal_handlers_restored():
    """A test that leaves Ctrl-C or SIGTERM handled its own way breaks every later test of Ctrl-C."""
    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [sig.name for sig, handler in before.items() if signal.getsignal(sig) is not handler]
    for sig, handler in before.items():
        signal.signal(sig, handler)
    assert not changed, f"the test left the {' and '.join(changed)} handler changed"


@pytest.fixture
def python_ctrl_c():
    """Ctrl-C handled by Python's own handler while the test runs, as a shell starts a program.

    A test of what a user's Ctrl-C does must not depend on the handler an earlier test or fixture
    left behind (an asyncio runner's, for one); the handler before the test is put back after it.
    """
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
