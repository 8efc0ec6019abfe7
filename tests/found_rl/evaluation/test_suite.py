"""Suite files: the shipped suite loads, and every mistake names the suite file and the field."""

from pathlib import Path

import pytest

from found_rl.errors import UserError
from found_rl.evaluation.suite import load_suite

ROOT = Path(__file__).resolve().parents[3]
TINY_TOWN = Path(__file__).parent / "data" / "tiny_town.yaml"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_the_shipped_suite_has_six_towns_of_five_kinds_none_a_quickstart_training_town():
    suite = load_suite(ROOT / "scenarios" / "suites" / "unseen_towns.yaml")
    assert len(suite.towns) == 6 and len({town.kind for town in suite.towns}) == 5
    assert all(town.scenario.routes.file is not None for town in suite.towns)
    assert not {town.name for town in suite.towns} & {"small_grid", "small_spider", "small_random"}
    packaged = [t for t in suite.towns if "site-packages" in str(t.scenario.map.file or "")]
    assert len(packaged) == 2  # read from the installed eclipse-sumo, not copied


def test_names_default_to_the_scenario_stem_and_kinds_to_the_map(tmp_path):
    suite_file = write(tmp_path, "s.yaml", f"towns:\n  - scenario: {TINY_TOWN}\n  - {{scenario: {TINY_TOWN}, name: "
                                           "again, kind: the same grid}\nrepetitions: 2\n")
    suite = load_suite(suite_file)
    assert [(t.name, t.kind) for t in suite.towns] == [("tiny_town", "grid"), ("again", "the same grid")]
    assert suite.repetitions == 2 and suite.seed == 0


def test_a_missing_town_file_names_the_suite_and_the_field(tmp_path):
    suite_file = write(tmp_path, "s.yaml", f"towns:\n  - scenario: {TINY_TOWN}\n  - scenario: nowhere.yaml\n")
    with pytest.raises(UserError, match=rf"{suite_file}: towns\[1\].scenario: no such scenario file: .*nowhere.yaml"):
        load_suite(suite_file)


def test_a_package_file_that_is_not_there_names_the_suite_the_scenario_and_its_field(tmp_path):
    town = write(tmp_path, "gone.yaml", "map: {file: package://sumo/tools/game/no_such_town.net.xml}\n"
                                        "routes: {random_length_m: 100}\n")
    suite_file = write(tmp_path, "s.yaml", "towns:\n  - scenario: gone.yaml\n")
    with pytest.raises(UserError) as caught:
        load_suite(suite_file)
    message = str(caught.value)
    assert message.startswith(f"{suite_file}: towns[0].scenario: {town}: map.file: package://sumo/tools/game/")
    assert "has no file tools/game/no_such_town.net.xml" in message and "eclipse-sumo" in message


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("towns: []\n", "towns: list should have at least 1 item"),
        ("towns:\n  - {scenario: a.yaml, colour: red}\n", r"towns\[0\].colour: unknown field"),
        ("towns:\n  - {scenario: t.yaml}\nrepetitions: 0\n", "repetitions: input should be greater than or equal to 1"),
        ("towns:\n  - {scenario: t.yaml, name: a}\n  - {scenario: t.yaml, name: a}\n",
         r"the name\(s\) \['a'\] are given twice"),
        ("- a\n", "expected a mapping of suite fields"),
    ],
)
def test_bad_fields_are_named(tmp_path, text, match):
    suite_file = write(tmp_path, "s.yaml", text)
    with pytest.raises(UserError, match=f"{suite_file}: .*{match}"):
        load_suite(suite_file)


def test_a_town_without_its_own_route_file_is_refused(tmp_path):
    write(tmp_path, "random.yaml", "map: {generate: {type: grid}}\nroutes: {random_length_m: 100}\n")
    suite_file = write(tmp_path, "s.yaml", "towns:\n  - scenario: random.yaml\n")
    with pytest.raises(UserError, match=r"towns\[0\].scenario: .*random routes; a suite town needs a route file"):
        load_suite(suite_file)
