"""One redaction for secrets, used by every error line, log and report: a password in a DSN of any form (a URL's
`user:password@`, an empty user, an `@` inside the password, a query's `password=`, libpq's key=value conninfo),
a `PGPASSWORD`-style variable, and every secret polyperf made or was handed this process (`register_secret`)."""

from __future__ import annotations

import os
import re

__all__ = ["MASK", "SecretText", "redact", "register_secret"]

MASK = "***"
# scheme://user:password@host — the password runs to the last `@` of the authority, so an `@` inside it is covered
_URL = re.compile(r"(?P<head>\b[a-zA-Z][\w+.-]*://[^\s:/@?#'\"]*):(?P<pw>[^\s'\"]*)@(?=[^\s@'\"]*(?:[\s/?#'\"]|$))")
# password=… in a query, a conninfo, an environment variable (PGPASSWORD=…) or a Python repr ('password': '…')
_KEYED = re.compile(
    r"(?P<key>\b[\w.-]*(?:pass(?:word|wd)|secret|token)['\"]?\s*[=:]\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\")]+)",
    re.IGNORECASE,
)
_SECRETS: set[str] = set()
_SECRET_VARIABLES = ("PGPASSWORD", "POLYPERF_STORE_PASSWORD")


def register_secret(value: str | None) -> None:
    """A value to mask wherever it appears (a generated password, a DSN's password), from now on in this process."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def _keyed(match: re.Match[str]) -> str:
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['key']}{quote}{MASK}{quote}"


def redact(text: str) -> str:
    """`text` with every secret it carries replaced by ***."""
    text = str(text)
    for name in _SECRET_VARIABLES:
        register_secret(os.environ.get(name))
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _URL.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _KEYED.sub(_keyed, text)


class SecretText(str):
    """A DSN or other text that holds a secret: used as the text itself, but its repr (what pytest prints of a
    failing call's arguments, what a dataclass repr holds) is redacted."""

    def __repr__(self) -> str:
        return repr(redact(str(self)))
