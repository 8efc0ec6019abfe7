"""Routes: leaderboard route files, dense route planning, random routes."""

from found_rl.routes.leaderboard import RouteSpec, parse_routes, write_routes
from found_rl.routes.planner import LaneSpan, RoutePlanner

__all__ = ["LaneSpan", "RoutePlanner", "RouteSpec", "parse_routes", "write_routes"]
