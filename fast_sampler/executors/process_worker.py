"""The loop run by one subprocess worker: build one env, then answer commands over a pipe.

Observations travel through a shared-memory slot (written here, read by the parent after the
reply); rewards, flags and infos travel through the pipe. Kept free of torch so workers start
fast.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import cloudpickle

from fast_sampler.errors import EnvLostError
from fast_sampler.spaces import ObsLayout


def _describe(exc: Exception) -> str:
    """One summary line first (for messages and regexes), then the worker's traceback."""
    return f"{type(exc).__name__}: {exc}\n--- worker traceback ---\n{traceback.format_exc()}"


# Commands (parent -> worker): ("attach", (shm_name, offset_bytes, nbytes)), ("reset", seed),
# ("step", action), ("close", None). Replies: ("ready", (observation_space, action_space)) once
# at start, then ("ok", payload), ("lost", reason) when the env raised EnvLostError (its
# simulator was replaced; the step is lost) or ("error", summary line + traceback) per command.


def _exit_with_parent() -> None:
    """Ask Linux to end this worker when its parent dies.

    A forked worker inherits a copy of the parent's end of its own pipe, so a parent killed
    with SIGKILL never gives it an EOF: without this it would wait forever, holding its env.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        parent = os.getppid()
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(0)
    except OSError:
        pass


def worker_main(conn: Connection, env_fn_bytes: bytes) -> None:
    """Entry point of a worker process; returns when told to close or when the pipe breaks."""
    _exit_with_parent()
    # Ctrl-C goes to the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        env = cloudpickle.loads(env_fn_bytes)()
        conn.send(("ready", (env.observation_space, env.action_space)))
    except Exception as exc:
        conn.send(("error", _describe(exc)))
        conn.close()
        return

    shm: SharedMemory | None = None
    slot: memoryview | None = None
    layout = ObsLayout(env.observation_space)
    try:
        while True:
            try:
                command, payload = conn.recv()
            except (EOFError, OSError):
                break
            try:
                if command == "attach":
                    shm_name, offset_bytes, nbytes = payload
                    shm = SharedMemory(name=shm_name)
                    slot = shm.buf[offset_bytes : offset_bytes + nbytes]
                    reply: Any = None
                elif command == "reset":
                    obs, info = env.reset(seed=payload)
                    layout.write(slot, obs)
                    reply = dict(info)
                elif command == "step":
                    obs, reward, terminated, truncated, info = env.step(payload)
                    layout.write(slot, obs)
                    reply = (float(reward), bool(terminated), bool(truncated), dict(info))
                elif command == "close":
                    conn.send(("ok", None))
                    break
                else:
                    raise ValueError(f"unknown command {command!r}")
            except EnvLostError as exc:
                conn.send(("lost", f"{type(exc).__name__}: {exc}"))
                continue
            except Exception as exc:
                conn.send(("error", _describe(exc)))
                continue
            conn.send(("ok", reply))
    finally:
        env.close()
        if slot is not None:
            slot.release()
        if shm is not None:
            shm.close()
        conn.close()
