"""docker/: the compose file is valid (``docker compose config`` where a docker CLI has compose)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
ENV = {**os.environ, "VLM_SERVER_TOKEN": "test-token"}


def compose_command() -> list[str] | None:
    """``docker compose`` (v2 plugin), else the older ``docker-compose`` (v1), else None."""
    if shutil.which("docker") is not None:
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


COMPOSE_CLI = compose_command()


@pytest.mark.skipif(COMPOSE_CLI is None, reason="no docker compose (v2 plugin) or docker-compose (v1) here")
def test_docker_compose_config_accepts_the_file(tmp_path):
    path = COMPOSE
    if COMPOSE_CLI == ["docker-compose"]:  # v1 predates the top-level project name
        text = "\n".join(line for line in COMPOSE.read_text().splitlines() if not line.startswith("name:"))
        path = tmp_path / "compose.yaml"
        path.write_text(text)
    result = subprocess.run(
        [*COMPOSE_CLI, "-f", str(path), "--project-directory", str(COMPOSE.parent), "config", "--quiet"],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_services_reserve_gpus_check_health_and_share_the_runs_volume():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert set(services) == {"carla", "advisor", "trainer"}
    for name, service in services.items():
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"], name
    assert "healthcheck" in services["carla"] and "healthcheck" in services["advisor"]
    assert "/readyz" in " ".join(services["advisor"]["healthcheck"]["test"])
    assert services["trainer"]["depends_on"] == {
        "carla": {"condition": "service_healthy"}, "advisor": {"condition": "service_healthy"}
    }  # fmt: skip
    assert "runs:/runs" in services["trainer"]["volumes"] and "runs" in spec["volumes"]
    assert services["trainer"]["environment"]["FOUND_RL_CARLA"] == "carla:2000:8000"
    assert services["carla"]["image"].startswith("carlasim/carla:")


def test_dockerfile_has_cpu_and_cuda_variants():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "ARG VARIANT=cpu" in text and "FROM base-${VARIANT}" in text
    assert "AS base-cpu" in text and "AS base-cuda" in text
    context_paths = [line.split()[1] for line in text.splitlines() if line.startswith("COPY ")]
    assert all((ROOT / path).exists() for path in context_paths)
