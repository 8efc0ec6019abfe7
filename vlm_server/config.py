"""Server configuration (pydantic, ``extra="forbid"``): listening, limits, backends, batching."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vlm_server.errors import UsageError, require_file


class BatchingConfig(BaseModel):
    """How one backend's dynamic batcher groups requests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_size: int = Field(
        32, ge=1, le=4096, description="flush when this many items are queued"
    )
    max_wait_ms: float = Field(
        5.0,
        ge=0.0,
        le=60_000.0,
        allow_inf_nan=False,
        description="flush when the oldest item waited this long",
    )
    max_queue_size: int = Field(
        2048, ge=1, description="queued items beyond this are refused with 429"
    )
    max_concurrent_batches: int = Field(
        1, ge=1, le=256, description="batches running at once (1 for a local model)"
    )
    admit_by_predicted_wait: bool = Field(
        True,
        description=(
            "refuse a request at once (503 + Retry-After) when its predicted queue wait, from the "
            "measured service rate, exceeds its remaining deadline, instead of queueing it to "
            "answer 504 later"
        ),
    )


class BackendConfig(BaseModel):
    """A backend by import path ``module:Class`` (or alias), its constructor options and batching."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    batching: BatchingConfig = Field(default_factory=BatchingConfig)


class ServerConfig(BaseModel):
    """Everything ``create_app`` needs. A token is mandatory when binding a non-loopback host."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8470, ge=0, le=65535)
    token: str | None = Field(
        None, min_length=8, description="bearer token clients must send"
    )
    advisor: BackendConfig | None = None
    clip: BackendConfig | None = None
    request_timeout_ms: float = Field(
        30_000.0,
        gt=0.0,
        allow_inf_nan=False,
        description="per-request deadline (504 after)",
    )
    body_read_timeout_ms: float = Field(
        10_000.0,
        gt=0.0,
        allow_inf_nan=False,
        description="slow-client guard (408 after)",
    )
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    max_items_per_request: int = Field(1024, ge=1)
    max_image_side: int = Field(
        1024, ge=1, description="largest accepted image height or width, px"
    )
    max_decoded_image_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1,
        description="decoded RGB bytes of all images in one request (PNG inflates up to ~1000x)",
    )
    shutdown_timeout_s: float = Field(
        30.0,
        gt=0.0,
        allow_inf_nan=False,
        description="time to drain in-flight requests",
    )

    @model_validator(mode="after")
    def _check(self) -> ServerConfig:
        if self.token is None and not is_loopback(self.host):
            raise ValueError(
                f"host={self.host!r} is not a loopback address: set a bearer token "
                "(--token or VLM_SERVER_TOKEN) before exposing the server"
            )
        # An explicit max_items_per_request above a queue could never be honoured. The default
        # is not checked: a smaller queue then refuses bigger requests itself (413 naming it).
        for role in ("advisor", "clip"):
            backend: BackendConfig | None = getattr(self, role)
            is_explicit = "max_items_per_request" in self.model_fields_set
            if is_explicit and backend is not None and backend.batching.max_queue_size < self.max_items_per_request:
                raise ValueError(
                    f"max_items_per_request ({self.max_items_per_request}) exceeds {role}.batching.max_queue_size "
                    f"({backend.batching.max_queue_size}): a full request could never be queued; "
                    "raise the queue size or lower max_items_per_request"
                )
        return self


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals; every other name counts as exposed."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML/JSON server config into a dict (validated by the caller).

    Raises:
        FileNotFoundError: no such file.
        UsageError: anything else wrong with the file; the message names it.
    """
    path = require_file(path, "server config")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"server config {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"server config {path}: not UTF-8 text: {exc.reason}"
        ) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"server config {path}: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"server config {path}: expected a mapping at top level, got {type(data).__name__}"
        )
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where and what, without PyYAML's multi-line excerpt."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"{where}not valid YAML/JSON: {problem}"
