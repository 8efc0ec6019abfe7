"""Routes: leaderboard route files, dense route planning, random routes, progress along a route."""

from found_rl.routes.densifier import LaneSpan, RouteSampling
from found_rl.routes.leaderboard import RouteSpec, parse_routes, write_routes
from found_rl.routes.planner import RoutePlanner

__all__ = ["LaneSpan", "RoutePlanner", "RouteSampling", "RouteSpec", "parse_routes", "write_routes"]
