"""Imports point one way, and the hot paths stay light."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, python_env

PACKAGE = ROOT / "lore_plugin"
# Which module may import which outside library.
OWNERS = {"apsw": {"store.py"}, "anthropic": {"llm.py"}, "mcp": {"server.py"},
          "onnxruntime": {"embedding.py"}, "tokenizers": {"embedding.py"},
          "fastembed": {"embedding.py"}}
# The pure core imports nothing from the rest of the package.
PURE = {"types.py": set(), "errors.py": set(), "relevance.py": set(), "schema.py": set()}
HEAVY = ("numpy", "anthropic", "mcp", "fastembed", "onnxruntime", "pydantic")


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
    return names


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_outside_library_is_imported_by_one_module_only(library):
    users = {p.name for p in PACKAGE.glob("*.py")
             if any(n == library or n.startswith(library + ".") for n in imports_of(p))}
    assert users <= OWNERS[library], users


@pytest.mark.parametrize("module", sorted(PURE))
def test_the_pure_core_does_not_reach_outwards(module):
    local = {n for n in imports_of(PACKAGE / module) if n.startswith(".")}
    assert local <= {".types", ".errors"} - {"." + module[:-3]}, local


def test_no_core_module_imports_the_entry_points():
    entry = {".server", ".hooks", ".cli", ".cli_ops", ".cli_maint", ".worker"}
    for path in PACKAGE.glob("*.py"):
        if "." + path.stem in entry:
            continue
        assert not imports_of(path) & entry, path.name


def test_every_module_stays_readable_in_size():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert all(n < 900 for n in sizes.values()), sizes


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
            "{'numpy', 'fastembed', 'onnxruntime', 'anthropic'})))")
    out = subprocess.run([PYTHON, "-c", code], env=python_env(), capture_output=True, text=True,
                         timeout=60)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
