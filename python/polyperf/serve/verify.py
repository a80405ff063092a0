"""HTTP conformance of an app before any load: status codes, required headers, Content-Type, body
shape and values of every endpoint, Date freshness, and the 4xx answers to bad input. An app that
fails verification is never benchmarked (`require_verified`)."""

from __future__ import annotations

import email.utils
import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from polyperf.errors import VerificationFailed

__all__ = ["DEVICES", "Check", "require_verified", "verify"]

DEVICES = [
    {"id": 1, "mac": "5F-33-CC-1F-43-82", "firmware": "2.1.6"},
    {"id": 2, "mac": "EF-2B-C4-F5-D6-34", "firmware": "2.1.5"},
    {"id": 3, "mac": "62-46-13-B7-B3-A1", "firmware": "3.0.0"},
    {"id": 4, "mac": "96-A8-DE-5B-77-14", "firmware": "1.0.1"},
    {"id": 5, "mac": "7E-3B-62-A6-09-12", "firmware": "3.5.6"},
]
REQUIRED_HEADERS = ("server", "date", "content-type", "content-length")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """One keep-alive connection, reopened if the server closed it (after a 4xx, say)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"bad server URL {url!r}")
        self.host, self.port = parts.hostname, parts.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=10)

    def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=body)
                resp = self.conn.getresponse()
                data = resp.read()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                if headers.get("connection", "").lower() == "close":
                    self.conn.close()
                return Response(resp.status, headers, data)
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def _headers_ok(resp: Response) -> str:
    missing = [h for h in REQUIRED_HEADERS if h not in resp.headers]
    if missing:
        return f"missing headers {missing}"
    if int(resp.headers["content-length"]) != len(resp.body):
        return f"Content-Length {resp.headers['content-length']} != body {len(resp.body)} bytes"
    try:
        date = email.utils.parsedate_to_datetime(resp.headers["date"])
    except (TypeError, ValueError):
        return f"unparseable Date {resp.headers['date']!r}"
    skew = abs((datetime.now(UTC) - date).total_seconds())
    return f"Date {resp.headers['date']!r} is {skew:.0f}s off" if skew > 3 else ""


def _expect(
    checks: list[Check],
    name: str,
    resp: Response,
    status: int | tuple[int, ...],
    content_type: str | None = None,
    body: Callable[[Response], str] | None = None,
) -> None:
    statuses = status if isinstance(status, tuple) else (status,)
    problems = []
    if resp.status not in statuses:
        problems.append(f"status {resp.status}, expected {'/'.join(map(str, statuses))}")
    problems.append(_headers_ok(resp))
    if content_type and not resp.headers.get("content-type", "").startswith(content_type):
        problems.append(f"Content-Type {resp.headers.get('content-type')!r}, expected {content_type}")
    if body is not None and resp.status in statuses:
        try:
            problems.append(body(resp))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"body {resp.body[:80]!r}: {exc}")
    problems = [p for p in problems if p]
    checks.append(Check(name, not problems, "; ".join(problems)))


def _json_error(resp: Response) -> str:
    return "" if isinstance(resp.json().get("error"), str) else "no JSON error message"


def _common(c: Client, checks: list[Check]) -> None:
    _expect(
        checks,
        "GET /healthz",
        c.request("GET", "/healthz"),
        200,
        "application/json",
        lambda r: "" if r.json() == {"status": "ok"} else f"body {r.json()}",
    )
    _expect(checks, "GET unknown path → 404", c.request("GET", "/no/such/path"), 404)
    resp = c.request("DELETE", "/healthz")
    _expect(
        checks,
        "DELETE /healthz → 405 with Allow",
        resp,
        405,
        body=lambda r: "" if "allow" in r.headers else "no Allow header",
    )
    first = c.request("GET", "/healthz").headers.get("date")
    time.sleep(1.1)
    second = c.request("GET", "/healthz").headers.get("date")
    checks.append(Check("Date changes every second", first != second, f"{first!r} then {second!r}"))


_BAD_DEVICE_BODIES = {
    "malformed JSON": b'{"mac": "AA-BB"',
    "not an object": b"[1, 2]",
    "missing firmware": b'{"mac": "AA-BB-CC-DD-EE-FF"}',
    "mac not a string": b'{"mac": 42, "firmware": "1.0"}',
    "mac over 17 chars": b'{"mac": "AA-BB-CC-DD-EE-FF-0011", "firmware": "1.0"}',
    "firmware over 10 chars": b'{"mac": "AA-BB-CC-DD-EE-FF", "firmware": "1.0.0.0.0.0.0"}',
}


def _devices(c: Client, checks: list[Check], with_db: bool) -> None:
    _expect(
        checks,
        "GET /api/devices",
        c.request("GET", "/api/devices"),
        200,
        "application/json",
        lambda r: "" if r.json() == DEVICES else f"devices {r.json()}",
    )
    for name, body in _BAD_DEVICE_BODIES.items():
        _expect(
            checks,
            f"POST /api/devices {name} → 400",
            c.request("POST", "/api/devices", body),
            400,
            "application/json",
            _json_error,
        )
    big = b'{"mac": "' + b"A" * 64_000 + b'", "firmware": "1"}'
    _expect(checks, "POST /api/devices 64 KB body → 413/400", c.request("POST", "/api/devices", big), (413, 400))
    good = {"mac": "AA-BB-CC-DD-EE-FF", "firmware": "9.9.9"}
    resp = c.request("POST", "/api/devices", json.dumps(good).encode())
    if with_db:

        def created(r: Response) -> str:
            d = r.json()
            return "" if isinstance(d.get("id"), int) and {**d, "id": 0} == {**good, "id": 0} else f"body {d}"

        _expect(checks, "POST /api/devices → 201 created", resp, 201, "application/json", created)
    else:
        _expect(checks, "POST /api/devices without DB → 503", resp, 503, "application/json", _json_error)


# One _expect call per check, as in _devices: each check names its request, status and test.
def _hello(c: Client, checks: list[Check], with_db: bool) -> None:
    _expect(
        checks,
        "GET /",
        c.request("GET", "/"),
        200,
        "text/plain",
        lambda r: "" if r.body == b"Hello, World!" else f"body {r.body[:40]!r}",
    )


def _matrix(c: Client, checks: list[Check], with_db: bool) -> None:
    def product_shape(r: Response) -> str:
        d = r.json()
        rows = d["product"]
        ok = (
            d["n"] == 3
            and len(rows) == 3
            and all(len(row) == 3 and all(isinstance(v, int) and 0 <= v <= 243 for v in row) for row in rows)
        )
        return "" if ok else f"body {d}"

    _expect(
        checks,
        "POST /matrix-multiplication n=3",
        c.request("POST", "/matrix-multiplication", b'{"n": 3}'),
        200,
        "application/json",
        product_shape,
    )
    for name, body in {
        "n=0": b'{"n": 0}',
        "n=513": b'{"n": 513}',
        "n string": b'{"n": "3"}',
        "malformed": b'{"n":',
        "missing n": b"{}",
    }.items():
        _expect(
            checks,
            f"POST /matrix-multiplication {name} → 400",
            c.request("POST", "/matrix-multiplication", body),
            400,
            "application/json",
            _json_error,
        )


def _bson(c: Client, checks: list[Check], with_db: bool) -> None:
    article = {"hello": "world", "anotherKey": "anotherValue", "number": 1234}
    for path in ("clone", "document", "raw"):

        def docs(r: Response) -> str:
            d = r.json()
            return "" if d and all(doc == article for doc in d) else f"{len(d)} docs, first {d[:1]}"

        _expect(checks, f"GET /find?path={path}", c.request("GET", f"/find?path={path}"), 200, "application/json", docs)
    _expect(checks, "GET /find?path=bogus → 400", c.request("GET", "/find?path=bogus"), 400)


CHECKERS: dict[str, Callable[[Client, list[Check], bool], None]] = {
    "devices": _devices,
    "hello": _hello,
    "matrix": _matrix,
    "bson": _bson,
}


def verify(url: str, checks_name: str, *, with_db: bool = False) -> list[Check]:
    """Runs the common checks and the app's own against a running server at `url` (loopback)."""
    checks: list[Check] = []
    client = Client(url)
    try:
        _common(client, checks)
        CHECKERS[checks_name](client, checks, with_db)
    except (OSError, http.client.HTTPException) as exc:
        checks.append(Check("connection", False, f"{type(exc).__name__}: {exc}"))
    finally:
        client.close()
    return checks


def require_verified(name: str, checks: list[Check]) -> None:
    failed = [c for c in checks if not c.ok]
    if failed:
        raise VerificationFailed(f"{name} failed verification: " + "; ".join(f"{c.name}: {c.detail}" for c in failed))
