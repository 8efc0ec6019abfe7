"""The map raster is built once per map and resolution, then reused."""

from __future__ import annotations

from found_rl.bev.static_map import static_raster
from tests.scenes import four_lane_road


def test_static_raster_is_built_once_per_map():
    geometry = four_lane_road("test-cache")
    first = static_raster(geometry, 5.0, 2, 32_000_000)
    assert static_raster(geometry, 5.0, 2, 32_000_000) is first
    assert static_raster(geometry, 2.5, 2, 32_000_000) is not first
