"""Command-line options of the server, shared by ``python -m vlm_server`` and ``found-rl serve``."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import os
import socket
from typing import Any

from pydantic import ValidationError

from vlm_server.backends.base import BACKEND_ALIASES
from vlm_server.config import ServerConfig, load_config_file
from vlm_server.errors import UsageError
from vlm_server.schemas import error_location, error_message

TOKEN_ENV = "VLM_SERVER_TOKEN"
BATCHING_FLAGS = (
    "max_batch_size",
    "max_wait_ms",
    "max_queue_size",
    "max_concurrent_batches",
    "admit_by_predicted_wait",
)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# config fields set by a flag of another name
FLAG_OF_FIELD = {"max_body_bytes": "--max-body-mb"}


def finite_float(text: str) -> float:
    """argparse type: a float that is neither NaN nor infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


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
        type=finite_float,
        help="flush when the oldest item waited this long (default 5)",
    )
    parser.add_argument(
        "--max-queue-size", type=int, help="queued items before 429 (default 2048)"
    )
    parser.add_argument(
        "--max-concurrent-batches", type=int, help="model calls at once (default 1)"
    )
    parser.add_argument(
        "--admit-by-predicted-wait",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refuse at once (503 + Retry-After) a request predicted to miss its deadline (default on)",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=finite_float,
        help="per-request deadline before 504 (default 30000)",
    )
    parser.add_argument(
        "--max-body-mb",
        type=finite_float,
        help="request body limit in MiB (default 32)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="logging level (default INFO)",
    )


def parse_options(pairs: list[str], flag: str) -> dict[str, Any]:
    """``["base_ms=5", "device=cpu"]`` -> ``{"base_ms": 5, "device": "cpu"}``."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: expected KEY=VALUE, got {pair!r}")
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
            raise UsageError(f"--{role}-option given without --{role}")
        if options and spec is None:
            data[role] = _merged(data[role], "options", options)
        if batching and role in data:
            data[role] = _merged(data[role], "batching", batching)
    if "advisor" not in data and "clip" not in data:
        raise UsageError(
            "no backend: give --advisor SPEC and/or --clip SPEC (or a --config file)"
        )
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = f" in {args.config}" if args.config else ""
        field = error_location(first["loc"], root="")
        flag = _flag_for(first["loc"], args)
        name = f"{field} ({flag})" if flag else field
        prefix = f"{name}: " if name else ""
        raise UsageError(
            f"server config{where}: {prefix}{error_message(first)}"
        ) from None


def _merged(section: Any, key: str, flags: dict[str, Any]) -> Any:
    """``section`` with ``flags`` merged into ``section[key]``.

    A non-mapping (``advisor: fixed-cost``, ``options: 5``) is returned as it is, so that
    validation names it instead of a ``TypeError`` or a silent replacement.
    """
    if not isinstance(section, dict):
        return section
    current = section.get(key, {})
    if not isinstance(current, dict):
        return section
    return {**section, key: {**current, **flags}}


def _flag_for(loc: tuple[Any, ...], args: argparse.Namespace) -> str | None:
    """The command-line flag that set the config field at ``loc``, if a flag did."""
    if not loc:
        return None
    if loc[0] in ("advisor", "clip") and len(loc) >= 3:
        role, group, leaf = loc[0], loc[1], loc[2]
        if group == "batching" and getattr(args, str(leaf), None) is not None:
            return "--" + str(leaf).replace("_", "-")
        if group == "options" and getattr(args, f"{role}_option"):
            return f"--{role}-option"
        return None
    name = str(loc[0])
    flag = FLAG_OF_FIELD.get(name, "--" + name.replace("_", "-"))
    attr = flag[2:].replace("-", "_")
    return flag if getattr(args, attr, None) is not None else None


def serve(args: argparse.Namespace) -> int:
    """Validate the configuration, then serve until interrupted.

    Raises:
        UsageError: a flag, config file or field, backend spec or option, or the address is
            wrong; the message names it. Anything else is a bug and keeps its traceback.
    """
    from vlm_server.app import run_server

    config = config_from_args(args)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        run_server(config)
    except OSError as exc:
        if not _is_listen_error(exc, config.port):
            raise  # not the address: loading a model, a bug; it keeps its traceback
        raise UsageError(
            f"--host/--port: cannot listen on {config.host}:{config.port}: "
            f"{exc.strerror or exc}"
        ) from None
    return 0


LISTEN_ERRNOS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL)
"""What binding the user's address raises when it is taken or not this machine's."""


def _is_listen_error(exc: OSError, port: int) -> bool:
    """Whether ``exc`` is the answer to binding ``--host``/``--port`` (the user's to change).

    ``run_server`` also loads the models before it binds, so an ``OSError`` from there (a
    missing weights file, a full disk) must not be reported as the address's fault.
    """
    if isinstance(exc, socket.gaierror):  # --host names no address
        return True
    return exc.errno in LISTEN_ERRNOS or (exc.errno == errno.EACCES and port < 1024)
