"""Road networks: compiling, caching and reading SUMO networks, and their static geometry."""

from found_rl.maps.build import build_network, cache_root
from found_rl.maps.geometry import extract_map_geometry, load_map_geometry, network_hash
from found_rl.maps.identity import network_identity, scenario_network
from found_rl.maps.network import read_network

__all__ = [
    "build_network",
    "cache_root",
    "extract_map_geometry",
    "load_map_geometry",
    "network_hash",
    "network_identity",
    "read_network",
    "scenario_network",
]
