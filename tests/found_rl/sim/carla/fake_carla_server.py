"""A stand-in for a CARLA server process: listens on ``-carla-rpc-port`` and misbehaves on cue.

Run through a ``CarlaUE4.sh`` stub (see ``make_carla_root``). Like the real script, it starts a
child process (the "engine") in its own process group. Cues, from the environment:

- ``FAKE_CARLA_CRASH_AFTER_S``: exit with code 3 this long after listening;
- ``FAKE_CARLA_IGNORE_TERM=1``: ignore SIGTERM (a hung server), so only SIGKILL stops it;
- ``FAKE_CARLA_FAIL_START=1``: print an error and exit 1 before listening.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time


def main() -> None:
    port = next(int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("-carla-rpc-port="))
    print(f"fake CARLA server: args {sys.argv[1:]}", flush=True)
    if os.environ.get("FAKE_CARLA_FAIL_START") == "1":
        print("LowLevelFatalError: Vulkan device lost", flush=True)
        sys.exit(1)
    if os.environ.get("FAKE_CARLA_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The "engine": a child in the same process group, as CarlaUE4.sh starts CarlaUE4-Linux-Shipping.
    engine = subprocess.Popen([sys.executable, "-c", "import time, signal\n"
                               "signal.signal(signal.SIGTERM, signal.SIG_IGN) if "
                               f"{os.environ.get('FAKE_CARLA_IGNORE_TERM') == '1'} else None\n"
                               "time.sleep(3600)"])  # fmt: skip
    print(f"engine pid {engine.pid}", flush=True)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    listener.settimeout(0.1)
    crash_after = os.environ.get("FAKE_CARLA_CRASH_AFTER_S")
    deadline = time.monotonic() + float(crash_after) if crash_after else None
    while deadline is None or time.monotonic() < deadline:
        try:
            connection, _ = listener.accept()
            connection.close()
        except TimeoutError:
            pass
    print("fake CARLA server: crashing", flush=True)
    engine.kill()
    os._exit(3)


if __name__ == "__main__":
    main()
