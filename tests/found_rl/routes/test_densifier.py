"""The route densifier on hand-built spans: waypoints, lanes and commands are known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.routes.densifier import LaneSpan, RouteSampling, arc_length, slice_polyline

EAST = np.array([[0.0, 0.0], [10.0, 0.0]])
SOUTH = np.array([[10.0, 0.0], [10.0, 5.0]])


def test_slice_interpolates_its_ends_and_clips_to_the_polyline():
    np.testing.assert_allclose(slice_polyline(np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0]]), 2.0, 6.0),
                               [[2.0, 0.0], [4.0, 0.0], [4.0, 2.0]])  # fmt: skip
    np.testing.assert_allclose(slice_polyline(EAST, -3.0, 99.0), EAST)
    np.testing.assert_allclose(arc_length(np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 5.0]])), [0.0, 5.0, 6.0])


def test_spans_are_sampled_every_metre_with_their_lane_and_command():
    spans = [LaneSpan("east", 2.0, 10.0, RoadOption.LANEFOLLOW), LaneSpan("south", 0.0, 4.5, RoadOption.RIGHT)]
    pieces = [slice_polyline(EAST, 2.0, 10.0), slice_polyline(SOUTH, 0.0, 4.5)]
    route = RouteSampling(spacing_m=1.0, command_lookahead_m=12.0, command_lookahead_s=2.0).densify(spans, pieces, "r")
    assert route.length_m == pytest.approx(12.5)
    assert len(route.xy) == 14  # 0, 1, ..., 12 m and the end at 12.5 m
    np.testing.assert_allclose(route.xy[[0, 8, 9, 13]], [[2.0, 0.0], [10.0, 0.0], [10.0, 1.0], [10.0, 4.5]])
    # A waypoint takes the span of the segment it lies on: the corner (10, 0) starts the south lane.
    assert route.lane_ids == ("east",) * 8 + ("south",) * 6
    assert route.commands.tolist() == [RoadOption.LANEFOLLOW] * 8 + [RoadOption.RIGHT] * 6
    assert route.yaw_deg[0] == pytest.approx(0.0) and route.yaw_deg[-1] == pytest.approx(90.0)  # y is south
    assert (route.command_lookahead_m, route.command_lookahead_s) == (12.0, 2.0)


def test_a_drive_shorter_than_the_spacing_names_the_route():
    spans = [LaneSpan("east", 0.0, 0.5, RoadOption.LANEFOLLOW)]
    with pytest.raises(ValueError, match=r"route 'tiny': shorter than 1\.0 m"):
        RouteSampling().densify(spans, [slice_polyline(EAST, 0.0, 0.5)], "tiny")
