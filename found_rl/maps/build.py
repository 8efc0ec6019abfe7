"""Compiled SUMO networks, built with netgenerate/netconvert and cached by content hash.

A network is identified by everything that determines it (the generator command, or the
bytes of the OpenDRIVE file plus netconvert options, and the SUMO version), so a cached
network is reused across runs and processes. Builders write into a private temporary
folder and rename it into place, so concurrent builders never leave a half-written network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from found_rl.errors import UserError
from found_rl.maps.opendrive import REPORT_FILE, import_report, read_signal_plan
from found_rl.maps.opendrive import netconvert_args as opendrive_args
from found_rl.scenario import GridNetwork, MapConfig, RandomNetwork, SpiderNetwork

NETWORK_FILE = "network.net.xml"
BUILD_TIMEOUT_S = 600
# Part of an OpenDRIVE network's cache key: bump when the import (maps/opendrive.py) changes.
IMPORTER_VERSION = 2


def cache_root() -> Path:
    """``$FOUND_RL_CACHE`` (default ``~/.cache/found-rl``)."""
    return Path(os.environ.get("FOUND_RL_CACHE", Path.home() / ".cache" / "found-rl"))


def sumo_version() -> str:
    try:
        return metadata.version("eclipse-sumo")
    except metadata.PackageNotFoundError:
        return "unknown"


def netgenerate_args(spec: GridNetwork | SpiderNetwork | RandomNetwork) -> list[str]:
    """netgenerate flags (without binary and output) for a generated-network spec."""
    args = [
        f"--default.lanenumber={spec.lanes}",
        f"--default.speed={spec.speed_limit_mps}",
        f"--default.junctions.type={'traffic_light' if spec.traffic_lights else 'priority'}",
        "--no-turnarounds=true",
        "--junctions.corner-detail=5",
        f"--default.junctions.radius={spec.junction_radius_m}",
    ]
    if spec.sidewalks:
        args += [
            "--sidewalks.guess=true",
            "--sidewalks.guess.min-speed=0",
            "--crossings.guess=true",
        ]
    if isinstance(spec, GridNetwork):
        args += [
            "--grid",
            f"--grid.number={spec.junctions}",
            f"--grid.length={spec.block_length_m}",
            f"--grid.attach-length={spec.attach_length_m}",
        ]
    elif isinstance(spec, SpiderNetwork):
        args += [
            "--spider",
            f"--spider.arm-number={spec.arms}",
            f"--spider.circle-number={spec.circles}",
            f"--spider.space-radius={spec.ring_spacing_m}",
            "--spider.omit-center=true",
        ]
    else:
        args += [
            "--rand",
            f"--rand.iterations={spec.iterations}",
            f"--rand.min-distance={spec.min_edge_m}",
            f"--rand.max-distance={spec.max_edge_m}",
            f"--seed={spec.seed}",
        ]
    return args


def _binary(name: str) -> str:
    import sumolib  # local: sumolib is heavy to import

    return sumolib.checkBinary(name)


def _run_tool(command: list[str], tool: str, source: Path | None = None) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"{tool} did not finish within {BUILD_TIMEOUT_S} s: {' '.join(command)}"
        ) from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip()
        on = f"{source}: " if source is not None else ""
        raise UserError(f"{tool} failed (exit {done.returncode}): {on}{message}")


def _cached_build(key_material: dict, build: Callable[[Path], None]) -> Path:
    """Return the cached network for ``key_material``, building it with ``build(out_path)`` once."""
    key = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()[
        :20
    ]
    root = cache_root() / "networks"
    final_dir = root / key
    if (final_dir / NETWORK_FILE).is_file():
        return final_dir / NETWORK_FILE
    root.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        build(work_dir / NETWORK_FILE)
        (work_dir / "key.json").write_text(
            json.dumps(key_material, indent=1, sort_keys=True)
        )
        try:
            os.rename(work_dir, final_dir)
        except OSError:
            # Another process finished the same network first; theirs is identical.
            if not (final_dir / NETWORK_FILE).is_file():
                raise
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return final_dir / NETWORK_FILE


def build_network(config: MapConfig) -> Path:
    """Path of the SUMO ``.net.xml`` for a map config, compiling and caching it if needed.

    Raises:
        ValueError: netgenerate/netconvert failed (their message is included), or the map
            names a CARLA town.
    """
    if config.town is not None:
        raise UserError(
            f"map.town={config.town!r} is a CARLA town; SUMO needs map.generate or map.file"
        )
    if config.generate is not None:
        args = netgenerate_args(config.generate)

        def generate(out: Path) -> None:
            _run_tool(
                [_binary("netgenerate"), *args, f"--output-file={out}"], "netgenerate"
            )

        return _cached_build(
            {"tool": "netgenerate", "args": args, "sumo": sumo_version()}, generate
        )
    path = Path(config.file)
    if path.name.endswith((".net.xml", ".net.xml.gz")):  # a compiled network (SUMO reads gzip itself)
        return path
    return _import_opendrive(path, tuple(config.netconvert_options))


def _import_opendrive(path: Path, user_options: tuple[str, ...]) -> Path:
    """Compile an OpenDRIVE map with its traffic lights, sidewalks and crossings (maps/opendrive.py)."""
    source = path.read_bytes()
    try:
        plan = read_signal_plan(path)
    except ValueError:
        # Not XML: netconvert's own message says more (line and token); show that one.
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / NETWORK_FILE
            _run_tool([_binary("netconvert"), f"--opendrive-files={path}", f"--output-file={out}"], "netconvert", path)
        raise
    args = opendrive_args(plan, user_options)

    def convert(out: Path) -> None:
        command = [_binary("netconvert"), f"--opendrive-files={path}", *args, f"--output-file={out}"]
        _run_tool(command, "netconvert", path)
        # Beside the network in the builder's private folder, renamed into place with it.
        (out.parent / REPORT_FILE).write_text(import_report(plan, out).to_json())

    return _cached_build(
        {
            "tool": "netconvert",
            "xodr": hashlib.sha256(source).hexdigest(),
            "args": args,
            "importer": IMPORTER_VERSION,
            "sumo": sumo_version(),
        },
        convert,
    )
