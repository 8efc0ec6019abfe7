"""Keep networks compiled by these tests out of the user's cache."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def network_cache(tmp_path_factory: pytest.TempPathFactory):
    previous = os.environ.get("FOUND_RL_CACHE")
    os.environ["FOUND_RL_CACHE"] = str(tmp_path_factory.mktemp("found-rl-cache"))
    yield
    if previous is None:
        os.environ.pop("FOUND_RL_CACHE", None)
    else:
        os.environ["FOUND_RL_CACHE"] = previous
