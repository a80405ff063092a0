"""One reading of a load target, shared by every generator and by the workers: `parse_target` parses a URL once,
refuses anything two parsers could read differently, resolves the host, applies the loopback rule, and returns
a canonical `scheme://ADDRESS:PORT/path` that oha, wrk, bombardier, drill and locust all read the same way.

Standard library only: `locust_child.py` and `locust_remote.py` import it as a plain sibling module (they must not
import polyperf), so a worker checks a job with exactly the code its master used.

Why a strict subset of RFC 3986 instead of a parser's leniency: `urllib.parse` reads `http://A:1\\@B:2/` as host B,
while the WHATWG rules (used by Rust's `url` crate, so by oha) treat `\\` as `/` and read host A. Rather than pick
one parser and hope every generator agrees, only URLs on which they cannot disagree are accepted: no user-info,
no backslash, no whitespace or control or non-ASCII characters, no fragment, no percent-encoding outside the
path, IPv4 only as four plain decimal numbers (`2130706433`, `0x7f.1`, `0177.0.0.1` and `127.1` are read as IPv4
by some tools and as names by others), IPv6 only in brackets and never IPv4-mapped. The generator then gets the
resolved address, never the name, so a name cannot resolve differently between the check and the load.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["MAX_URL_LENGTH", "Target", "TargetRefused", "parse_target"]

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 unreserved, sub-delims, ':', '/', '?', '%', brackets for IPv6: '@' (user-info) and '#' (fragment) are
# legal in some places but left out, as are '\\', spaces, quotes, '<>^`{|}' and everything outside ASCII.
_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:/?%[]")
_SHAPE = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)"
    r"(?::(?P<port>[0-9]{1,5}))?"
    r"(?P<path>/[^?]*)?"
    r"(?:\?(?P<query>.*))?",
    re.ASCII | re.DOTALL,
)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_NUMERIC_LABEL = re.compile(r"(?:0[xX][0-9A-Fa-f]*|[0-9]+)", re.ASCII)  # WHATWG's "ends in a number" test
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


class TargetRefused(ValueError):
    """A load target polyperf will not send to; `str()` is one line naming the URL and the reason."""


@dataclass(frozen=True)
class Target:
    """A load target as every generator must read it: `address` is the one IP address that is loaded."""

    scheme: str  # "http" | "https"
    host: str  # as written (lower case): a name or an IP literal
    address: str  # the resolved IP address, without brackets
    port: int
    path: str  # path and query, always starting with "/"

    @property
    def netloc(self) -> str:
        ip = ipaddress.ip_address(self.address)
        return f"[{ip}]:{self.port}" if ip.version == 6 else f"{ip}:{self.port}"

    @property
    def origin(self) -> str:
        """`scheme://ADDRESS:PORT`, the base URL drill and locust take."""
        return f"{self.scheme}://{self.netloc}"

    @property
    def url(self) -> str:
        """The canonical URL handed to every generator."""
        return self.origin + self.path

    @property
    def is_loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


def _character_problem(url: str) -> str | None:
    for i, ch in enumerate(url):
        if ch in _ALLOWED:
            continue
        if ch == "@":
            return "user-info ('@') is not accepted anywhere in a load target"
        if ch == "\\":
            return "a backslash is read as '/' by some parsers and as data by others"
        if ch == "#":
            return "a fragment ('#') is never sent; leave it out"
        if ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"whitespace or a control character (U+{ord(ch):04X}) at position {i}"
        if ord(ch) > 0x7F:
            return f"a non-ASCII character (U+{ord(ch):04X}) at position {i}; IDNA mapping differs between tools"
        return f"character {ch!r} at position {i} is not accepted"
    if _BAD_ESCAPE.search(url):
        return "'%' not followed by two hex digits"
    return None


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `host` spells, None for a name; raises `ValueError(reason)` for an ambiguous spelling."""
    if host.startswith("["):
        try:
            ip6 = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"{host} is not an IPv6 address") from None
        embedded = ip6.ipv4_mapped
        if embedded is None and ip6.packed[:12] == bytes(12) and int(ip6) > 1:
            embedded = ipaddress.IPv4Address(ip6.packed[12:])  # deprecated IPv4-compatible form, ::a.b.c.d
        if embedded is not None:
            raise ValueError(f"{host} embeds the IPv4 address {embedded}: write {embedded} itself")
        return ip6
    labels = host.split(".")
    if not _NUMERIC_LABEL.fullmatch(labels[-1]):
        return None
    try:
        ip4 = ipaddress.IPv4Address(host)  # strict: four decimal parts, no leading zeros
    except ValueError:
        ip4 = None
    if ip4 is None or str(ip4) != host:
        raise ValueError(f"{host!r} is an IPv4 address in a form tools read differently: write it as a.b.c.d")
    return ip4


def _check_name(host: str) -> None:
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{host!r} is not a host name (letters, digits and '-' in dot-separated labels)")


def _resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"cannot resolve {host!r} ({exc})") from None
    found = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise ValueError(f"{host!r} resolves to nothing")
    return found


# what RFC 3986 allows unencoded in a path and query: unreserved, sub-delims, ":@/?" and "%" escapes
_NOT_IN_PATH = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]")


def _split(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path-and-query) of a URL in the strict subset; raises `ValueError(reason)`."""
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"longer than {MAX_URL_LENGTH} characters")
    problem = _character_problem(url)
    if problem:
        raise ValueError(problem)
    authority = url.partition("://")[2].partition("/")[0].partition("?")[0]
    if "%" in authority:
        raise ValueError("percent-encoding in the host or port (tools decode it differently)")
    match = _SHAPE.fullmatch(url)
    if match is None:
        raise ValueError("not of the form http(s)://HOST[:PORT][/PATH][?QUERY] with a host name or IP address")
    scheme = match["scheme"].lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"scheme {scheme!r}: only http and https are loaded")
    host = match["host"].lower()
    port = int(match["port"]) if match["port"] else _DEFAULT_PORTS[scheme]
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is outside 1-65535")
    path = (match["path"] or "/") + (f"?{match['query']}" if match["query"] is not None else "")
    odd = sorted(set(_NOT_IN_PATH.findall(path)))
    if odd:  # e.g. '[': urllib3 sends it as %5B, others as it stands
        raise ValueError(f"{''.join(odd)!r} in the path or query must be percent-encoded (readers encode it or not)")
    # RFC 3986 case normalisation: urllib3 (and so the WHATWG-style readers) write escapes as %0A, never %0a
    path = _ESCAPE.sub(lambda escape: escape[0].upper(), path)
    # a second parser must read the same parts; in this subset it always does, and if it ever does not, refuse
    other = urlsplit(url)
    other_host = other.hostname or ""
    if (other.scheme.lower(), f"[{other_host}]" if ":" in other_host else other_host) != (scheme, host) or (
        other.port or _DEFAULT_PORTS[scheme]
    ) != port:
        raise ValueError("parsers disagree on its host or port")
    return scheme, host, port, path


def parse_target(url: str, *, allow_remote: bool = False) -> Target:
    """The `Target` that `url` names, if polyperf may load it; raises `TargetRefused` (one line) otherwise.

    Loopback only (127.0.0.0/8, ::1; a name must resolve to loopback addresses only) unless `allow_remote`,
    the explicit opt-in for a server on another host that agreed to be loaded. Unspecified and multicast
    addresses are refused either way. Of a name's addresses the first IPv4 one is loaded (servers here bind
    127.0.0.1), else the first; with https the certificate must then be valid for that address."""
    if not isinstance(url, str):
        raise TargetRefused(f"load target {url!r} is not a string")
    try:
        scheme, host, port, path = _split(url)
        literal = _literal(host)
        if literal is None:
            _check_name(host)
        addresses = [literal] if literal is not None else _resolve(host, port)
    except ValueError as exc:
        raise TargetRefused(f"refusing load target {url!r}: {exc}") from None

    def refused(addresses: list[str], why: str) -> TargetRefused:
        what = host if literal is not None else f"{host} (resolves to {', '.join(addresses)})"
        return TargetRefused(f"refusing to load {url!r}: {what} is {why}")

    odd = [str(a) for a in addresses if a.is_unspecified or a.is_multicast or getattr(a, "ipv4_mapped", None)]
    if odd:
        raise refused(odd, "not an address to send load to")
    foreign = [str(a) for a in addresses if not a.is_loopback]
    if foreign and not allow_remote:
        raise refused(
            foreign,
            "not loopback; pass --allow-remote (allow_remote=True) only for a server on another host that agreed "
            "to be loaded",
        )
    chosen = min(addresses, key=lambda a: a.version)  # stable: the first IPv4 address, else the first
    return Target(scheme=scheme, host=host, address=str(chosen), port=port, path=path)
