"""Stage "build": the app registry (apps, languages, variants, endpoints) and cargo / go builds, cached by
source state, with what a build costs (wall time, binary size)."""

from polyperf.build.builder import BuildResult, build
from polyperf.build.registry import APPS, App, BuildSpec, get_app

__all__ = ["APPS", "App", "BuildResult", "BuildSpec", "build", "get_app"]
