"""Every command the documentation shows exists, with the flags it shows.

A line of a ```sh block (and a `polyperf …` line of a ```yaml block) is an example to run: its arguments are parsed
by the command's own argparse parser, built in this process, so a renamed flag, a lost choice or a missing argument
fails here. A command named inline in the prose (`polyperf ab X X --test-env-b …`) is a mention: its subcommands and
every flag it shows must exist. Nothing is run: a parse stops before any command's work."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from polyperf.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`((?:polyperf|nox -s|python -m polyperf|python tests/|pytest) [^`]*)`")
# `[--dry-run]`, `[--out FILE]`, `[SUITES…]`: optional parts, shown in brackets
OPTIONAL = re.compile(r"\[([^\]]*)\]")


@dataclass(frozen=True)
class Shown:
    page: str
    line: str
    example: bool  # a line of a code block (parsed whole) or a mention in the prose (flags checked)

    def __str__(self) -> str:
        return f"{self.page}: {self.line.split('  #')[0].strip()}"


def _block_lines(lang: str, body: str) -> Iterator[str]:
    for raw in body.splitlines():
        line = raw.strip()
        if lang == "yaml":  # a workflow's `run:` lines; only polyperf's are ours to check
            line = line.removeprefix("- ").removeprefix("run:").strip()
            if not line.startswith("polyperf "):
                continue
        if not line or line.startswith("#"):
            continue
        yield from (part.strip() for part in line.split("&&"))


def shown_commands() -> list[Shown]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(ROOT))
        for lang, body in FENCE.findall(text):
            if lang in ("sh", "bash", "yaml"):
                found += [Shown(name, line, True) for line in _block_lines(lang, body)]
        prose = FENCE.sub("", text)
        found += [Shown(name, m.group(1), False) for m in INLINE.finditer(prose)]
    return found


def _words(line: str) -> list[str]:
    line = OPTIONAL.sub(lambda m: m.group(1), line)
    return [w for w in shlex.split(line, comments=True) if w not in ("…", "...")]


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


@cache
def _module_parser(target: str) -> argparse.ArgumentParser:
    """The parser a module's `main` builds, taken at its `parse_args` call, before anything runs. `target` is a
    module name (`python -m`) or a path to a script (`python tests/x.py`)."""
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(f"docs_cmd_{Path(target).stem}", ROOT / target)
        assert spec is not None and spec.loader is not None, target
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    saved = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        module.main()
    except _Captured as captured:
        return captured.parser
    finally:
        argparse.ArgumentParser.parse_args = saved  # type: ignore[method-assign]
    raise AssertionError(f"{target}: main() built no argparse parser")


@cache
def _nox_sessions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any("session" in ast.unparse(d) for d in node.decorator_list)
    }


def _nox_polyperf_command(session: ast.FunctionDef) -> str | None:
    """`bench` for a session that runs `session.run("polyperf", "run", *session.posargs)`: its posargs are
    polyperf's."""
    for node in ast.walk(session):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "session.run":
            args = [ast.unparse(a) for a in node.args]
            if args[:1] == ["'polyperf'"] and "*session.posargs" in args:
                return ast.literal_eval(args[1])
    return None


@cache
def _pytest_flags() -> frozenset[str]:
    """pytest's own flags and the polyperf plugin's, from `pytest --help` with the plugin loaded (one process)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "polyperf.record.pytest_plugin", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _check_flags(parser: argparse.ArgumentParser, words: list[str], prog: str) -> None:
    """A mention: each word that names a subcommand descends into it, and every flag shown must be an option of the
    parser it is given to (up to `--`, or an option that takes the rest of the line)."""
    for word in words:
        if word == "--":
            return
        subs = _subparsers(parser)
        if word in subs:
            parser, prog = subs[word], f"{prog} {word}"
            continue
        if not word.startswith("-") or re.fullmatch(r"-\d.*", word):
            continue
        flag = word.split("=", 1)[0]
        actions = {s: a for a in parser._actions for s in a.option_strings}
        assert flag in actions, f"`{prog}` has no option {flag}"
        if actions[flag].nargs == argparse.REMAINDER:
            return


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """The docs show flags whole: `--fail-on` for `--fail-on-regression` would parse, and read as a typo."""
    parser.allow_abbrev = False
    for sub in _subparsers(parser).values():
        _no_abbreviations(sub)


def _parse(parser: argparse.ArgumentParser, words: list[str], shown: Shown) -> None:
    _no_abbreviations(parser)
    try:
        parser.parse_args(words)
    except SystemExit as exit_:
        assert exit_.code == 0, f"{shown}: refused by the command's parser (its error is printed above)"


def check(shown: Shown) -> None:
    words = _words(shown.line)
    program, args = words[0], words[1:]
    if program == "python" and args[:2] == ["-m", "polyperf"]:
        program, args = "polyperf", args[2:]
    if program == "polyperf":
        parser = build_parser()
    elif program == "python" and args[:1] == ["-m"]:
        parser, args = _module_parser(args[1]), args[2:]
    elif program == "python":
        assert (ROOT / args[0]).is_file(), f"{shown}: no file {args[0]}"
        parser, args = _module_parser(args[0]), args[1:]
    elif program == "nox":
        assert args[:1] == ["-s"], f"{shown}: name the session with -s"
        name, posargs = args[1], args[3:] if args[2:3] == ["--"] else args[2:]
        assert name in _nox_sessions(), f"{shown}: noxfile.py has no session {name!r}"
        command = _nox_polyperf_command(_nox_sessions()[name])
        if command is None:
            uses_posargs = "session.posargs" in ast.unparse(_nox_sessions()[name])
            assert not posargs or uses_posargs, f"{shown}: session {name!r} takes no arguments"
            return
        parser, args = build_parser(), [command, *posargs]
    elif program == "pytest":
        assert (ROOT / args[0]).is_file(), f"{shown}: no file {args[0]}"
        for word in args[1:]:
            if word.startswith("-"):
                assert word.split("=", 1)[0] in _pytest_flags(), f"{shown}: pytest has no option {word}"
        return
    elif program in ("pip", "cargo", "go", "apt-get", "benchstat", "bencher", "gh"):
        return  # other tools' commands: theirs to keep
    else:
        raise AssertionError(f"{shown}: a command this test does not know; teach it, or show it in another block")
    if shown.example:
        _parse(parser, args, shown)
    else:
        _check_flags(parser, args, program)


COMMANDS = shown_commands()


def test_the_docs_show_commands():
    examples = [c for c in COMMANDS if c.example]
    assert len(examples) >= 40, f"only {len(examples)} example lines found: is the block parser broken?"
    assert any(c.line.startswith("nox -s") for c in examples)


@pytest.mark.parametrize("shown", COMMANDS, ids=str)
def test_a_shown_command_exists_with_its_flags(shown):
    check(shown)


def test_a_wrong_flag_or_session_is_caught():
    """The checks fail where they should: on a flag that does not exist, a missing argument, an unknown session."""
    for line in (
        "polyperf compare A B --fail-on-regresion 0",  # misspelt flag
        "polyperf compare A",  # a missing argument
        "polyperf compare A B --fail-on 0",  # an abbreviation argparse would accept
        "polyperf run --profile medium",  # not a profile
        "nox -s benchmark",  # no such session
        "nox -s lint -- --fix",  # lint takes no arguments
        "python tests/history_scale.py --runz 5",  # a script's own parser
        "pytest suites/test_bson.py --polyperf-profil=smoke",
    ):
        with pytest.raises((AssertionError, SystemExit)):
            check(Shown("test", line, True))
    with pytest.raises(AssertionError):
        check(Shown("test", "polyperf history evaluate --kk 5", False))


def test_every_command_is_in_the_reference():
    reference = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    missing = [name for name in _subparsers(build_parser()) if f"| `{name}` |" not in reference]
    assert not missing, f"docs/commands.md lists no row for: {', '.join(missing)}"
    sessions = [name for name in _nox_sessions() if f"nox -s {name}" not in reference]
    assert not sessions, f"docs/commands.md shows no `nox -s` line for: {', '.join(sessions)}"
