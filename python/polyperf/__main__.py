"""`python -m polyperf` runs the CLI."""

from polyperf.cli import main

raise SystemExit(main())
