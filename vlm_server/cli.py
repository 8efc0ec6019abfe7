"""Command-line options of the server, shared by ``python -m vlm_server`` and ``found-rl serve``."""

from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

from pydantic import ValidationError

from vlm_server.backends.base import BACKEND_ALIASES
from vlm_server.config import ServerConfig, load_config_file
from vlm_server.schemas import error_location

TOKEN_ENV = "VLM_SERVER_TOKEN"
BATCHING_FLAGS = (
    "max_batch_size",
    "max_wait_ms",
    "max_queue_size",
    "max_concurrent_batches",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    aliases = ", ".join(sorted(BACKEND_ALIASES))
    parser.add_argument(
        "--config", help="YAML/JSON ServerConfig file; flags below override it"
    )
    parser.add_argument(
        "--host", help="bind address (default 127.0.0.1; others need a token)"
    )
    parser.add_argument("--port", type=int, help="TCP port (default 8470)")
    parser.add_argument(
        "--token", help=f"bearer token clients must send (default: ${TOKEN_ENV})"
    )
    parser.add_argument(
        "--advisor",
        metavar="SPEC",
        help=f"advisor backend 'module:Class' or alias ({aliases})",
    )
    parser.add_argument(
        "--advisor-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="advisor constructor option (VALUE parsed as JSON, else a string); repeatable",
    )
    parser.add_argument(
        "--clip", metavar="SPEC", help="CLIP scorer backend, e.g. 'openclip'"
    )
    parser.add_argument(
        "--clip-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="CLIP backend constructor option; repeatable",
    )
    parser.add_argument(
        "--max-batch-size",
        type=int,
        help="flush a batch at this many items (default 32)",
    )
    parser.add_argument(
        "--max-wait-ms",
        type=float,
        help="flush when the oldest item waited this long (default 5)",
    )
    parser.add_argument(
        "--max-queue-size", type=int, help="queued items before 429 (default 2048)"
    )
    parser.add_argument(
        "--max-concurrent-batches", type=int, help="model calls at once (default 1)"
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=float,
        help="per-request deadline before 504 (default 30000)",
    )
    parser.add_argument(
        "--max-body-mb", type=float, help="request body limit in MiB (default 32)"
    )
    parser.add_argument(
        "--log-level", default="INFO", help="logging level (default INFO)"
    )


def parse_options(pairs: list[str], flag: str) -> dict[str, Any]:
    """``["base_ms=5", "device=cpu"]`` -> ``{"base_ms": 5, "device": "cpu"}``."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Merge the config file (if any) with flags; errors name the field."""
    data: dict[str, Any] = load_config_file(args.config) if args.config else {}
    for name in ("host", "port"):
        if getattr(args, name) is not None:
            data[name] = getattr(args, name)
    token = args.token or os.environ.get(TOKEN_ENV)
    if token:
        data["token"] = token
    if args.request_timeout_ms is not None:
        data["request_timeout_ms"] = args.request_timeout_ms
    if args.max_body_mb is not None:
        data["max_body_bytes"] = int(args.max_body_mb * 1024 * 1024)
    batching = {
        name: getattr(args, name)
        for name in BATCHING_FLAGS
        if getattr(args, name) is not None
    }
    for role in ("advisor", "clip"):
        spec = getattr(args, role)
        options = parse_options(getattr(args, f"{role}_option"), f"--{role}-option")
        if spec is not None:
            data[role] = {"spec": spec, "options": options}
        elif options and role not in data:
            raise ValueError(f"--{role}-option given without --{role}")
        elif options:
            data[role] = {
                **data[role],
                "options": {**data[role].get("options", {}), **options},
            }
        if role in data and batching:
            data[role] = {
                **data[role],
                "batching": {**data[role].get("batching", {}), **batching},
            }
    if "advisor" not in data and "clip" not in data:
        raise ValueError(
            "no backend: give --advisor SPEC and/or --clip SPEC (or a --config file)"
        )
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = f" in {args.config}" if args.config else ""
        raise ValueError(
            f"server config{where}: {error_location(first['loc'], root='config')}: {first['msg']}"
        ) from None


def serve(args: argparse.Namespace) -> int:
    """Validate the configuration, then serve until interrupted."""
    from vlm_server.app import run_server

    config = config_from_args(args)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run_server(config)
    return 0
