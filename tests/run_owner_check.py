"""One owner per run folder: outside `polyperf/record/`, no module makes a run folder, writes its env.json, finalizes
its table or points `latest` itself; they go through `record.run.Run`. import-linter checks modules, not names, so
this reads the code's syntax trees instead (standard library only: `nox -s lint` runs it as a script,
`tests/test_run_owner.py` runs it in the tests and proves it can fail).

    python tests/run_owner_check.py [PACKAGE_DIR]      # exit 1 with one line per breach
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "polyperf"
OWNER = "record"  # the package folder allowed to hold these calls
# what makes, writes, finalizes or re-points a run folder; `Run` wraps each of them
NAMES = frozenset({"new_run_dir", "write_env", "finalize_run", "point_latest", "merge_additions", "add_note"})
# a write whose target names the folder's environment record or its `latest` link
FILES = frozenset({"ENV", "ENV_ADDITIONS", "LATEST", "env.json", "env.additions.json", "latest"})
WRITES = frozenset({"write_text", "write_bytes", "write_text_atomic", "symlink_to", "hardlink_to", "replace", "rename"})


def _names_in(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.add(sub.value)
    return found


def _write_target(call: ast.Call) -> ast.AST | None:
    """What a write call writes to: the receiver of `x.write_text(...)`, or the first argument of
    `write_text_atomic(path, ...)`, `open(path, "w")` and `os.replace(src, dst)`'s destination."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in ("write_text_atomic",) and call.args:
        return call.args[0]
    if name in ("replace", "rename", "symlink") and isinstance(func, ast.Attribute) and len(call.args) == 2:
        return call.args[1]  # os.replace(src, dst)
    if name in WRITES and isinstance(func, ast.Attribute):
        return func.value if name not in ("replace", "rename") else (call.args[0] if call.args else None)
    if name == "open" and len(call.args) >= 2:
        mode = call.args[1]
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
            return call.args[0]
    return None


def breaches(source: str, filename: str) -> Iterator[str]:
    """`file:line: what` for every use of the owner's names and every write to a run folder's env.json or `latest`."""
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("polyperf"):
            for alias in node.names:
                if alias.name in NAMES:
                    yield f"{filename}:{node.lineno}: imports {alias.name} from {node.module}: go through Run"
        elif isinstance(node, ast.Attribute) and node.attr in NAMES:
            yield f"{filename}:{node.lineno}: calls .{node.attr}: go through Run"
        elif (
            isinstance(node, ast.Call)
            and (target := _write_target(node)) is not None
            and (hit := sorted(_names_in(target) & FILES))
        ):
            yield f"{filename}:{node.lineno}: writes a run folder's {hit[0]}: go through Run"


def check(package: Path = PACKAGE) -> list[str]:
    """Every breach in `package`, outside its `record/` folder."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] == OWNER:
            continue
        found += breaches(path.read_text(encoding="utf-8"), str(path))
    return found


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else PACKAGE
    if not package.is_dir():
        print(f"run_owner_check: {package} is not a folder", file=sys.stderr)
        return 2
    found = check(package)
    for line in found:
        print(line, file=sys.stderr)
    print(f"run folders: {'one owner (record.run.Run)' if not found else f'{len(found)} breaches'}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
