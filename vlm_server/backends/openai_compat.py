"""OpenAI-compatible upstream advisor (vLLM, SGLang): chat completions with image data URLs.

The upstream batches on its own, so each item is one request; a pooled connector and a
semaphore bound the requests in flight. Failures are per item, never per batch.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import aiohttp

from vlm_server.answers import build_prompt, parse_answer
from vlm_server.backends.base import AdviseItem, AdviseResult
from vlm_server.errors import UsageError
from vlm_server.images import png_bytes


class OpenAICompatAdvisor:
    """Advice from ``POST {base_url}/chat/completions``.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        model: model name the upstream serves.
        api_key_env: name of the environment variable holding the upstream's API key, if any.
        max_concurrency: requests in flight to the upstream (also the connection pool size).
        timeout_s: per upstream request.
        max_tokens: generation budget.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        max_concurrency: int = 32,
        timeout_s: float = 30.0,
        max_tokens: int = 32,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(
                f"base_url must start with http:// or https://, got {base_url!r}"
            )
        if max_concurrency < 1 or timeout_s <= 0 or max_tokens < 1:
            raise UsageError(
                "max_concurrency, timeout_s and max_tokens must be positive"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not self.api_key:
            raise UsageError(
                f"api_key_env={api_key_env!r}: that environment variable is not set"
            )
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.parse_failures = 0
        self._session: aiohttp.ClientSession | None = None
        self._semaphore: asyncio.Semaphore | None = None

    async def load(self) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_concurrency),
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers=headers,
        )
        self._semaphore = asyncio.Semaphore(self.max_concurrency)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        return list(await asyncio.gather(*(self._advise_one(item) for item in items)))

    async def _advise_one(self, item: AdviseItem) -> AdviseResult:
        if self._session is None or self._semaphore is None:
            raise RuntimeError("OpenAICompatAdvisor.load() was not called")
        content: list[dict[str, Any]] = []
        if item.image is not None:
            png = await asyncio.to_thread(png_bytes, item.image)
            url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            content.append({"type": "image_url", "image_url": {"url": url}})
        content.append(
            {
                "type": "text",
                "text": build_prompt(item.command, item.speed_mps, item.state),
            }
        )
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        }
        async with self._semaphore:
            try:
                async with self._session.post(self.url, json=body) as response:
                    if response.status != 200:
                        return AdviseResult(
                            None, error=f"upstream answered HTTP {response.status}"
                        )
                    reply = await response.json()
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
                return AdviseResult(
                    None, error=f"upstream request failed: {type(exc).__name__}"
                )
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return AdviseResult(
                None, error="upstream reply has no choices[0].message.content"
            )
        if not isinstance(text, str):
            return AdviseResult(None, error="upstream content is not text")
        parsed = parse_answer(text)
        if parsed.action is None:
            self.parse_failures += 1
        return AdviseResult(parsed.action, text=text, error=parsed.error)
