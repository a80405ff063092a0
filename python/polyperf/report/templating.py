"""The Jinja2 environment over the package's templates (`polyperf/report/templates/`), with the filters they
use to write Markdown tables."""

from __future__ import annotations

from typing import Any

import jinja2

from polyperf.common.redact import redact
from polyperf.report.view import Table

__all__ = ["md_table", "render_template"]


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(table: Table) -> str:
    """A GitHub-flavoured Markdown table (numeric columns right-aligned)."""
    if not table.rows:
        return "_no rows_"
    head = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---:" if c in table.numeric else "---" for c in table.columns) + "|"
    body = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in table.rows]
    return "\n".join([head, rule, *body])


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("polyperf.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "html.j2"]),
    undefined=jinja2.StrictUndefined,  # a misspelt name fails the render instead of printing nothing
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENV.filters["md_table"] = md_table
_ENV.filters["md"] = _md_cell


def render_template(name: str, **context: Any) -> str:
    """Renders one of the package's templates (`report.html.j2`, `summary.md.j2`, `index.html.j2`), with every
    secret a run folder or store may carry (a DSN's password) masked."""
    return redact(_ENV.get_template(name).render(**context))
