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


def has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not has_compose(), reason="no docker CLI with the compose plugin here")
def test_docker_compose_config_accepts_the_file():
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True, env=ENV,
        timeout=60,
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
