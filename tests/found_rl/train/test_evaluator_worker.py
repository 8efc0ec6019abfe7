"""The evaluation worker process of a training run, when the trainer is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "evaluation" / "data"


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (an exited process may wait a moment as a zombie to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_the_worker_of_a_killed_trainer_exits_without_a_traceback(tmp_path):
    script = (
        "import time\n"
        "from pathlib import Path\n"
        "from found_rl.train.evaluator import EvaluationWorker\n"
        f"worker = EvaluationWorker(Path({str(DATA / 'tiny_town.yaml')!r}), "
        f"Path({str(DATA / 'quickstart_one_route.xml')!r}), seed=0)\n"
        "worker.wait_ready()\n"
        "print(worker.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    environment = {**os.environ, "FOUND_RL_CACHE": str(tmp_path / "cache")}
    trainer = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    worker_pid = int(trainer.stdout.readline())
    os.kill(trainer.pid, signal.SIGKILL)
    try:
        _, stderr = trainer.communicate(timeout=60)  # EOF once the worker is gone too
        deadline = time.monotonic() + 10
        while _running(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(worker_pid)
    finally:
        if _running(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)  # our own leftover, by PID
    assert "Traceback" not in stderr and "EOFError" not in stderr and "leaked" not in stderr, stderr
