"""Two datasets share a town when they share a road network, and only identities of one definition compare."""

from found_rl.dataset.town_overlap import towns_overlap

GRID = "roads-v1:" + "a" * 20
CITY = "roads-v1:" + "b" * 20
OLD_GRID = "0123456789abcdef0123"  # a file-byte hash, as older datasets recorded


def test_the_overlap_is_by_network_whatever_the_names():
    assert towns_overlap({GRID: "grid_copy", CITY: "city"}, {GRID: "grid"}) == [
        {"network": GRID, "town": "grid_copy", "training_town": "grid"}]
    assert towns_overlap({CITY: "city"}, {GRID: "grid"}) == []


def test_identities_of_two_definitions_give_no_answer_rather_than_a_false_no():
    assert towns_overlap({GRID: "grid"}, {OLD_GRID: "grid"}) is None
    assert towns_overlap({OLD_GRID: "grid"}, {OLD_GRID: "grid"}) == [
        {"network": OLD_GRID, "town": "grid", "training_town": "grid"}]
