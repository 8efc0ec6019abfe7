"""``advisor:URL``: drive with the actions of an advisor server (a VLM, or the expert plug-in).

Each step sends what a training-time advice request carries (ARCHITECTURE §6): the RGB BEV,
the command and forward speed, and the privileged ``state`` (``ExpertObservation.to_dict()``,
which also holds the ``target_ego_xy`` the VLM prompt reads). The answer is executed at once,
so this measures the advisor as a closed-loop driver.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import numpy as np

from found_rl.dataset.text import prompt_speed_mps
from found_rl.errors import UserError
from found_rl.expert import ExpertObservation, ExpertObserver
from found_rl.world import WorldSnapshot

if TYPE_CHECKING:
    from found_rl.env import ObservationKind

FALLBACK_ACTION = np.array([-1.0, 0.0], dtype=np.float32)
"""Full brake, used until the advisor has answered once in an episode."""

RETRY_S = 0.25  # between attempts to reach a server that is still starting


def check_reachable(url: str, timeout_s: float, flag: str = "--agent") -> None:
    """Raise ``ValueError`` unless ``GET url/healthz`` answers within ``timeout_s``.

    A refused connection is retried until then: a server started just before (``found-rl
    serve ... &``) is still importing its backends. Messages name ``flag advisor:URL``.
    """
    if not url.startswith(("http://", "https://")):
        raise UserError(f"{flag} advisor:{url}: the URL must start with http:// or https://")
    health = url.rstrip("/") + "/healthz"
    deadline_s = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(health, timeout=max(deadline_s - time.monotonic(), 0.1)) as response:
                if response.status != 200:
                    raise UserError(f"{flag} advisor:{url}: {health} answered HTTP {response.status}")
                return
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ConnectionRefusedError) and time.monotonic() + RETRY_S < deadline_s:
                time.sleep(RETRY_S)
                continue
            raise UserError(
                f"{flag} advisor:{url}: no advisor server answered {health} within {timeout_s:g} s ({reason}); "
                "is `found-rl serve` running there?"
            ) from None


class AdvisorAgent:
    """Asks the advisor at ``url`` for every action.

    Args:
        url: base URL of a ``vlm_server`` (``http://host:port``).
        timeout_s: longest wait for one answer (and for the reachability check).
        flag: the command-line flag that named the advisor, for messages.

    Raises:
        ValueError: if the server does not answer its health check in time.
    """

    observation: ObservationKind = "bev"

    def __init__(self, url: str, timeout_s: float = 10.0, flag: str = "--agent") -> None:
        from vlm_server.client import BlockingAdvisorClient

        check_reachable(url, timeout_s, flag)
        self.name = f"advisor:{url}"
        self.url = url
        self.flag = flag
        self.client = BlockingAdvisorClient(url, timeout_s=timeout_s)
        self.observer = ExpertObserver()
        self.renderer = None
        self.failed_answers = 0
        self._last_action = FALLBACK_ACTION

    def reset(self) -> None:
        self.observer.reset()
        if self.renderer is not None:
            self.renderer.reset()
        self._last_action = FALLBACK_ACTION

    def follow(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> None:
        """Keep up with a step someone else drives (route progress, BEV history) without asking the advisor."""
        self._observe(snapshot)

    def _observe(self, snapshot: WorldSnapshot) -> ExpertObservation:
        """Advance route progress and the BEV history by one step; the expert's view of it."""
        from found_rl.bev import BevRenderer

        if self.renderer is None:
            self.renderer = BevRenderer(snapshot.map)
        observation = self.observer.observe(snapshot)
        self.renderer.render(snapshot, self.observer.route_index)
        return observation

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray:
        from vlm_server.client import AdvisorError, AdvisorUnavailable

        observation = self._observe(snapshot)
        try:
            acc, steer = self.client.advise(
                self.renderer.render_rgb(), observation.command, prompt_speed_mps(snapshot.ego), observation.to_dict()
            )
        except AdvisorUnavailable as exc:
            raise UserError(f"{self.flag} advisor:{self.url}: the advisor stopped answering: {exc}") from exc
        except AdvisorError:
            # A malformed answer (e.g. unparseable VLM text): keep the last action.
            self.failed_answers += 1
            return self._last_action
        self._last_action = np.array([acc, steer], dtype=np.float32)
        return self._last_action

    def close(self) -> None:
        self.client.close()
