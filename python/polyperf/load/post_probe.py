"""A slow, steady witness next to the load: one client thread that POSTs a device (random, or a fixed `body`)
every `interval` seconds and logs each request ([end time, latency s, status (0: no response), returned id,
mac, firmware], the format of locust's POST-mode request logs). Its timeline shows when an app started
failing while the database was down, how long its error answers took, and when it recovered.

Loopback only, bounded by `max_seconds` and `max_requests`, pinned to the client CPUs.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import time
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from polyperf.common.background import BackgroundLoop
from polyperf.load.locust_post import device_body
from polyperf.load.result import require_loopback

__all__ = ["PostProbe"]


class PostProbe(BackgroundLoop):
    """`with PostProbe(url, interval=0.02) as probe: ...` → `probe.lines` (JSON strings, one per request)."""

    def __init__(
        self,
        url: str,
        *,
        interval: float = 0.02,
        timeout: float = 5.0,
        cpus: Sequence[int] = (),
        max_seconds: float = 120.0,
        max_requests: int = 20_000,
        body: Mapping[str, str] | None = None,
    ) -> None:
        require_loopback(url)
        super().__init__("polyperf-post-probe", cpus)
        self.join_timeout = timeout + 5  # a request under way ends by its own timeout
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.interval = interval
        self.timeout = timeout
        self.max_seconds = max_seconds
        self.max_requests = max_requests
        self.lines: list[str] = []
        self.error_bodies: list[str] = []  # the first few non-2xx answers, to show what a client is told
        self._rng = random.Random()
        self.body = dict(body) if body else None  # one fixed device (beside oha's same body), else random ones

    def _post(self, conn: http.client.HTTPConnection | None) -> http.client.HTTPConnection | None:
        device = self.body or device_body(self._rng)
        started = time.perf_counter()
        code, row_id = 0, None
        try:
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn.request("POST", self.path, json.dumps(device), {"content-type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            code = resp.status
            if 200 <= code < 300:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    row_id = json.loads(payload)["id"]
            elif len(self.error_bodies) < 3:
                self.error_bodies.append(f"HTTP {code}: {payload[:300].decode(errors='replace')}")
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
        line = [time.time(), time.perf_counter() - started, code, row_id, device["mac"], device["firmware"]]
        self.lines.append(json.dumps(line))
        return conn

    def answered_since(self, since: float) -> bool:
        """Whether a request that ended after `since` (epoch s) was acknowledged (2xx)."""
        for text in reversed(self.lines):
            end, _latency, code = json.loads(text)[:3]
            if end <= since:
                return False
            if 200 <= code < 300:
                return True
        return False

    def wait_answered_since(self, since: float, timeout: float) -> bool:
        """Waits (bounded by `timeout` s) until a request ending after `since` is acknowledged."""
        deadline = time.monotonic() + timeout
        while not self.answered_since(since):
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return self.answered_since(since)
            time.sleep(self.interval)
        return True

    def _loop(self) -> None:
        deadline = time.monotonic() + self.max_seconds
        conn = None
        while not self._stop.is_set() and time.monotonic() < deadline and len(self.lines) < self.max_requests:
            conn = self._post(conn)
            self._stop.wait(self.interval)
        if conn is not None:
            conn.close()
