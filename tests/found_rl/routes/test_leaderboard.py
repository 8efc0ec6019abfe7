"""Reading and writing CARLA leaderboard route files."""

import numpy as np
import pytest

from found_rl.routes import RouteSpec, parse_routes, write_routes

CURRENT = """<?xml version="1.0"?>
<routes>
  <route id="7" town="Town01">
    <weathers><weather route_percentage="0" cloudiness="5"/></weathers>
    <waypoints>
      <position x="338.7" y="226.8" z="0.0"/>
      <position x="321.9" y="194.8" z="0.0"/>
      <position x="119.7" y="129.1" z="0.0"/>
    </waypoints>
    <scenarios><scenario name="s" type="X"><trigger_point x="1" y="2" z="0" yaw="0"/></scenario></scenarios>
  </route>
  <route id="8" town="Town01">
    <waypoints><position x="1" y="2" z="0"/><position x="3" y="4" z="0"/></waypoints>
  </route>
</routes>
"""

LEGACY = """<routes>
  <route id="0" town="Town02">
    <waypoint pitch="0.0" roll="0.0" x="-7.5" y="142.2" yaw="90.0" z="0.0"/>
    <waypoint pitch="0.0" roll="0.0" x="41.3" y="190.6" yaw="0.0" z="0.0"/>
  </route>
</routes>
"""


def test_current_layout(tmp_path):
    (tmp_path / "r.xml").write_text(CURRENT)
    routes = parse_routes(tmp_path / "r.xml")
    assert [r.route_id for r in routes] == ["7", "8"]
    assert routes[0].town == "Town01"
    np.testing.assert_allclose(
        routes[0].waypoints_xy, [[338.7, 226.8], [321.9, 194.8], [119.7, 129.1]]
    )


def test_legacy_waypoint_layout(tmp_path):
    (tmp_path / "r.xml").write_text(LEGACY)
    (route,) = parse_routes(tmp_path / "r.xml")
    np.testing.assert_allclose(route.waypoints_xy, [[-7.5, 142.2], [41.3, 190.6]])


def test_write_then_read_round_trips(tmp_path):
    specs = [
        RouteSpec("a", "town", np.array([[0.0, 1.25], [10.5, -3.0]])),
        RouteSpec("b", "", np.array([[1.0, 1.0], [2.0, 2.0]])),
    ]
    write_routes(tmp_path / "out" / "routes.xml", specs)
    back = parse_routes(tmp_path / "out" / "routes.xml")
    assert [(r.route_id, r.town) for r in back] == [("a", "town"), ("b", "")]
    np.testing.assert_allclose(back[0].waypoints_xy, specs[0].waypoints_xy)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<routes></routes>", "no <route> elements found"),
        (
            '<routes><route id="3"><waypoints><position x="1" y="2"/></waypoints></route></routes>',
            "route '3': needs at least 2 waypoints, got 1",
        ),
        (
            '<routes><route id="3"><waypoint x="a" y="2"/><waypoint x="1" y="2"/></route></routes>',
            "route '3' waypoint 0: attribute 'x' must be a number, got 'a'",
        ),
        ("<routes><route", "malformed route XML"),
        (
            (
                '<routes><route id="1"><waypoint x="1" y="2"/><waypoint x="1" y="3"/></route>'
                '<route id="1"><waypoint x="1" y="2"/><waypoint x="1" y="3"/></route></routes>'
            ),
            "route ids must be unique",
        ),
    ],
)
def test_bad_route_files(tmp_path, text, expected):
    (tmp_path / "r.xml").write_text(text)
    with pytest.raises(
        ValueError, match="r.xml: .*" + expected.replace("(", r"\(").replace(")", r"\)")
    ):
        parse_routes(tmp_path / "r.xml")


def test_missing_route_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="route file not found"):
        parse_routes(tmp_path / "none.xml")


def test_a_folder_is_not_a_route_file(tmp_path):
    (tmp_path / "routes.xml").mkdir()
    with pytest.raises(ValueError, match=r"routes\.xml: is a folder"):
        parse_routes(tmp_path / "routes.xml")


def test_routes_without_a_town_are_kept_whatever_town_is_asked_for(tmp_path):
    (tmp_path / "r.xml").write_text(CURRENT.replace(' town="Town01"', "", 1))
    assert [r.route_id for r in parse_routes(tmp_path / "r.xml", "Town01")] == ["7", "8"]
    assert [r.route_id for r in parse_routes(tmp_path / "r.xml", "Town05")] == ["7"]
    (tmp_path / "all.xml").write_text(CURRENT)
    with pytest.raises(ValueError, match=r"no route of town 'Town05'"):
        parse_routes(tmp_path / "all.xml", "Town05")


def test_an_absent_town_is_not_written_as_an_empty_one(tmp_path):
    write_routes(tmp_path / "r.xml", [RouteSpec("a", "", np.array([[0.0, 0.0], [1.0, 1.0]]))])
    assert "town" not in (tmp_path / "r.xml").read_text()
