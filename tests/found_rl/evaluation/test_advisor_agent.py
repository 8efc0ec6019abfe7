"""Reaching an advisor server: a server still starting is waited for, a missing one is named."""

import http.server
import socket
import threading
import time

import pytest

from found_rl.evaluation.advisor_agent import check_reachable


class Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_server_that_starts_within_the_timeout_is_waited_for():
    port = unused_port()
    servers = []

    def start_late() -> None:
        time.sleep(0.8)
        server = http.server.HTTPServer(("127.0.0.1", port), Healthz)
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=start_late, daemon=True).start()
    started = time.monotonic()
    try:
        check_reachable(f"http://127.0.0.1:{port}", timeout_s=30.0)
    finally:
        while not servers:
            time.sleep(0.05)
        servers[0].shutdown()
    assert 0.7 < time.monotonic() - started < 30.0


def test_no_server_fails_after_the_timeout_naming_the_url():
    port = unused_port()
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"advisor:http://127.0.0.1:{port}: no advisor server answered .* within 1 s"):
        check_reachable(f"http://127.0.0.1:{port}", timeout_s=1.0)
    assert 0.7 < time.monotonic() - started < 5.0
