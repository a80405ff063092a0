"""POST mode of `locust_child.py` (a sibling it imports as a plain module, since that child cannot import
polyperf): random device bodies like the Rust-vs-Go article's client sent, one request sent and counted
like a GET, and a per-process log of every request for the rows-vs-acknowledged check."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["RequestLog", "device_body", "send_body"]

CONTENT_TYPE = {"content-type": "application/json"}


def device_body(rng: random.Random | None = None) -> dict[str, str]:
    """A random device: a valid MAC (six upper-case hex octets joined by '-', 17 characters) and a firmware
    version of at most 10 characters (the harness's `post_probe` draws its devices here too)."""
    src: Any = rng or random  # the module's shared generator unless a seeded one is given
    mac = "-".join(f"{b:02X}" for b in src.getrandbits(48).to_bytes(6, "big"))
    return {"mac": mac, "firmware": f"{src.randint(0, 9)}.{src.randint(0, 99)}.{src.randint(0, 999)}"}


class RequestLog:
    """`<prefix>-<pid>.jsonl`, one JSON array per request: [end time (epoch s), latency (s), status (0: no
    response), returned id or null, mac sent, firmware sent]. Line-buffered, so a process stopped hard
    loses no answered request."""

    def __init__(self) -> None:
        self.fh: IO[str] | None = None

    def write(self, prefix: str | None, latency: float, code: int, returned: Any, body: Mapping[str, Any]) -> None:
        if not prefix:
            return
        if self.fh is None:
            self.fh = open(f"{prefix}-{os.getpid()}.jsonl", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        line = [time.time(), latency, code, returned, body.get("mac"), body.get("firmware")]
        self.fh.write(json.dumps(line) + "\n")


def send_body(client: Any, path: str, target: Mapping[str, Any], status: Counter, log: RequestLog) -> None:
    """One request with a JSON body through locust's FastHttpSession (`target`: method, body — a JSON string
    or "devices" —, requests_log); a 2xx must carry the new row's id."""
    body = device_body() if target["body"] == "devices" else json.loads(target["body"] or "{}")
    started = time.perf_counter()
    returned = None
    with client.request(
        target["method"],
        path,
        name=path,
        data=json.dumps(body),
        headers=CONTENT_TYPE,
        catch_response=True,
        allow_redirects=False,  # a 3xx is a failure with its status; 307/308 would resend the body elsewhere
    ) as resp:
        code = resp.status_code or 0
        if code:
            status[code] += 1
        if 200 <= code < 300:
            try:
                returned = resp.json()["id"]
                resp.success()
            except (ValueError, KeyError, TypeError):
                resp.failure("2xx without a JSON id")
        elif code:
            resp.failure(f"HTTP {code}")
        else:
            resp.failure(f"connection: {type(resp.error).__name__ if resp.error else 'no response'}")
    log.write(target["requests_log"], time.perf_counter() - started, code, returned, body)
