"""Road networks: compiling, caching and reading SUMO networks, and their static geometry."""

from found_rl.maps.build import build_network, cache_root
from found_rl.maps.geometry import extract_map_geometry, load_map_geometry, network_hash
from found_rl.maps.network import read_network

__all__ = [
    "build_network",
    "cache_root",
    "extract_map_geometry",
    "load_map_geometry",
    "network_hash",
    "read_network",
]
