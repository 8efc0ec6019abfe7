"""The loop run by one subprocess worker: build one env, then answer commands over a pipe.

Observations travel through a shared-memory slot (written here, read by the parent after the
reply); rewards, flags and infos travel through the pipe. Kept free of torch so workers start
fast.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from dataclasses import dataclass
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


class _ParentGone(BaseException):
    """The parent died (SIGKILL, OOM): unwinds whatever the worker was doing, past ``except Exception``."""


@dataclass
class _Slot:
    """This worker's view of the observation block, once attached."""

    shm: SharedMemory | None = None
    view: memoryview | None = None


def _exit_with_parent(parent: int) -> None:
    """Ask Linux to signal this worker (SIGTERM) when its parent dies; then raise :class:`_ParentGone`.

    A forked worker inherits a copy of the parent's end of its own pipe, so a parent killed
    with SIGKILL never gives it an EOF: without this it would wait forever, holding its env.
    A SIGTERM while the parent lives (the parent stopping it) ends the worker at once, as before.
    """
    if not sys.platform.startswith("linux"):
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        if os.getppid() != parent:
            raise _ParentGone
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    _signal_on_parent_death(parent, signal.SIGTERM)


def die_with_parent() -> None:
    """End this process (SIGKILL, silently) when its parent dies; for workers holding no shared memory."""
    if sys.platform.startswith("linux"):
        _signal_on_parent_death(os.getppid(), signal.SIGKILL)


def _signal_on_parent_death(parent: int, signum: int) -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signum)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(0)


def worker_main(conn: Connection, env_fn_bytes: bytes) -> None:
    """Entry point of a worker process; returns when told to close, the pipe breaks or the parent dies.

    A worker whose parent died leaves without a traceback, after closing its env and removing
    the observation block: one worker's unlink succeeds (the others find it gone), and it also
    unregisters the block from the resource tracker the workers share with the dead parent,
    which would otherwise warn of a leaked shared-memory object.
    """
    parent = os.getppid()
    _exit_with_parent(parent)
    # Ctrl-C goes to the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env, slot = None, _Slot()
    try:
        try:
            env = cloudpickle.loads(env_fn_bytes)()
            conn.send(("ready", (env.observation_space, env.action_space)))
        except Exception as exc:
            conn.send(("error", _describe(exc)))
            return
        _serve(conn, env, slot)
    except _ParentGone:
        pass
    except OSError:  # a reply to a parent that is gone
        if os.getppid() == parent:
            raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # clean up whole, whoever asks to stop
        if env is not None:
            env.close()
        if slot.view is not None:
            slot.view.release()
        if slot.shm is not None:
            if os.getppid() != parent:
                with contextlib.suppress(FileNotFoundError):
                    slot.shm.unlink()
            slot.shm.close()
        conn.close()


def _serve(conn: Connection, env: Any, slot: _Slot) -> None:
    """Answer the parent's commands until it says close or its pipe breaks."""
    layout = ObsLayout(env.observation_space)
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if command == "attach":
                shm_name, offset_bytes, nbytes = payload
                slot.shm = SharedMemory(name=shm_name)
                slot.view = slot.shm.buf[offset_bytes : offset_bytes + nbytes]
                reply: Any = None
            elif command == "reset":
                obs, info = env.reset(seed=payload)
                layout.write(slot.view, obs)
                reply = dict(info)
            elif command == "step":
                obs, reward, terminated, truncated, info = env.step(payload)
                layout.write(slot.view, obs)
                reply = (float(reward), bool(terminated), bool(truncated), dict(info))
            elif command == "close":
                conn.send(("ok", None))
                return
            else:
                raise ValueError(f"unknown command {command!r}")
        except EnvLostError as exc:
            conn.send(("lost", f"{type(exc).__name__}: {exc}"))
            continue
        except Exception as exc:
            conn.send(("error", _describe(exc)))
            continue
        conn.send(("ok", reply))
