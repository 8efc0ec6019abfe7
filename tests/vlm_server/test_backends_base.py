import pytest

from vlm_server.backends.base import AdvisorBackend, ClipScorerBackend, load_backend
from vlm_server.backends.clip import OpenClipScorer
from vlm_server.backends.fixed_cost import FixedCostAdvisor, FixedCostScorer


def test_aliases_and_import_paths_load_the_same_class():
    by_alias = load_backend("fixed-cost", {"base_ms": 1})
    by_path = load_backend("vlm_server.backends.fixed_cost:FixedCostAdvisor", {"base_ms": 1})
    assert type(by_alias) is type(by_path) is FixedCostAdvisor
    assert by_alias.base_ms == 1


def test_builtin_backends_satisfy_the_plugin_protocols():
    assert isinstance(FixedCostAdvisor(), AdvisorBackend)
    assert isinstance(FixedCostScorer(), ClipScorerBackend)
    assert isinstance(OpenClipScorer(pretrained=None), ClipScorerBackend)


def test_bad_options_and_missing_classes_are_named():
    with pytest.raises(ValueError, match="bad options"):
        load_backend("fixed-cost", {"no_such_option": 1})
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        load_backend("vlm_server.backends.fixed_cost:Nope")
