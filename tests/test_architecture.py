"""Imports point one way, and the hot paths stay light."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, python_env

PACKAGE = ROOT / "lore_plugin"
# Which module or subpackage (relative to lore_plugin) may import which outside library.
OWNERS = {"apsw": {"store"}, "anthropic": {"llm"}, "mcp": {"server"},
          "onnxruntime": {"embedding"}, "tokenizers": {"embedding"},
          "huggingface_hub": {"model_source"}, "fastembed": set(),
          "starlette": {"web"}, "uvicorn": {"web"}}
# The pure core imports nothing from the rest of the package.
PURE = {"types.py": set(), "errors.py": set(), "relevance.py": set(), "schema.py": set()}
HEAVY = ("numpy", "anthropic", "mcp", "fastembed", "onnxruntime", "pydantic", "starlette",
         "uvicorn")
MAX_LINES = 400  # the house style's limit for a module a newcomer can read in one sitting


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
    return names


def modules() -> dict[str, Path]:
    """Every module of the package, subpackages included, by dotted name below lore_plugin
    ("store" for store/__init__.py, "store.fragments" for store/fragments.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts) or "lore_plugin"] = path  # the package's own __init__
    return found


def local_imports(name: str, path: Path, known: dict[str, Path], strict: bool = False) -> set[str]:
    """The package's modules that `name` imports anywhere (lazy and type-only imports too),
    relative imports resolved. `strict` fails on a relative import that names no module."""
    package = [] if name == "lore_plugin" else name.split(".")
    package = package if path.name == "__init__.py" else package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name.removeprefix("lore_plugin.") for alias in node.names
                       if alias.name.startswith("lore_plugin.")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1] + (node.module or "").split(".")
            base = [p for p in base if p]
            targets = [".".join([*base, alias.name]) if ".".join([*base, alias.name]) in known
                       else ".".join(base) or "lore_plugin" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lore_plugin."):
            targets = [str(node.module).removeprefix("lore_plugin.")]
        else:
            continue
        if strict:
            assert all(t in known for t in targets), (name, node.lineno, targets)
        found |= {t for t in targets if t in known and t != name}
    return found


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_outside_library_is_imported_by_one_module_only(library):
    users = {name for name, path in modules().items()
             if any(n == library or n.startswith(library + ".") for n in imports_of(path))}
    owners = OWNERS[library]
    assert all(u.split(".")[0] in owners for u in users), users


def test_apsw_stays_inside_the_store_package():
    """The rule above, seen from the storage side: the package really is the apsw user."""
    users = {name for name, path in modules().items() if "apsw" in imports_of(path)}
    assert users and all(u.startswith("store.") for u in users), users


@pytest.mark.parametrize("module", sorted(PURE))
def test_the_pure_core_does_not_reach_outwards(module):
    local = {n for n in imports_of(PACKAGE / module) if n.startswith(".")}
    assert local <= {".types", ".errors"} - {"." + module[:-3]}, local


def test_no_core_module_imports_the_entry_points():
    known = modules()
    entry = {"server", "hooks", "cli", "cli_ops", "cli_maint", "worker"} | {
        name for name in known if name.split(".")[0] == "web"}
    for name, path in known.items():
        if name in entry:
            continue
        assert not local_imports(name, path, known) & entry, name


def test_only_the_command_line_starts_the_viewer():
    """The web package is reached from `lore ui` alone: the hooks, the worker and the MCP
    server never import it, even lazily."""
    known = modules()
    users = {name for name, path in known.items()
             if name.split(".")[0] != "web" and any(t.split(".")[0] == "web" for t in
                                                     local_imports(name, path, known))}
    assert users == {"cli_ops"}, users


def test_every_module_stays_readable_in_size():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_modules_import_one_another_without_a_circle():
    known = modules()
    graph = {name: local_imports(name, path, known) for name, path in known.items()}
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import circle: " + " -> ".join(trail[trail.index(name):] + [name]))
        if name in done:
            return
        for other in sorted(graph[name]):
            walk(other, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])


def test_every_relative_import_names_a_module_of_the_package():
    """Also the lazy ones inside functions, which importing a module does not run."""
    known = modules()
    for name, path in known.items():
        local_imports(name, path, known, strict=True)


def test_the_import_graph_sees_relative_imports_of_every_shape():
    """The circle test is only as good as the graph: check it resolves `from . import x`,
    `from .x import y`, `from ..x import y` inside a subpackage, and lazy imports."""
    known = modules()
    assert "render" in local_imports("cli", known["cli"], known)  # from . import render
    assert "cli_maint" in local_imports("cli", known["cli"], known)  # lazy, in a function
    assert {"errors", "store.connection"} <= local_imports(
        "store.fragments", known["store.fragments"], known)  # ..errors, .connection
    assert "store.fragments" in local_imports("store", known["store"], known)  # the __init__


PROBE = """
import io, json, sys
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps({payload}).encode()))
from lore_plugin import hooks
hooks.main([{event!r}])
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})), file=sys.stderr)
"""


@pytest.mark.parametrize("event", ["stop", "session-end"])
def test_per_turn_hooks_import_nothing_heavy(event, tmp_path):
    payload = {"session_id": "s", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path)}
    code = PROBE.format(payload=payload, event=event, heavy=HEAVY)
    out = subprocess.run([PYTHON, "-c", code], env=python_env(LORE_HOME=str(tmp_path / "h"),
                                                              LORE_CLAUDE_PROJECTS=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []


def test_the_stop_hook_path_skips_even_the_light_but_slow_imports(tmp_path):
    """Stop runs after every turn: dataclasses, typing and orjson each cost it milliseconds."""
    from lore_plugin.store import Store
    from tests.transcripts import TranscriptWriter

    Store(tmp_path / "h" / "memory.db").close()  # a real watermark lookup, a real count
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.exchange(3)
    payload = {"session_id": "s", "transcript_path": str(writer.path), "cwd": str(tmp_path)}
    code = PROBE.format(payload=payload, event="stop", heavy=("dataclasses", "typing", "orjson"))
    out = subprocess.run([PYTHON, "-c", code], env=python_env(LORE_HOME=str(tmp_path / "h"),
                                                              LORE_CLAUDE_PROJECTS=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []


def test_the_server_module_starts_without_loading_the_model_or_the_sdk(tmp_path):
    code = ("import sys, json; import lore_plugin.server; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'numpy', 'fastembed', 'onnxruntime', 'anthropic'} "
            "or m.startswith('lore_plugin.web'))))")  # (mcp itself loads starlette and uvicorn)
    out = subprocess.run([PYTHON, "-c", code], env=python_env(), capture_output=True, text=True,
                         timeout=60)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
