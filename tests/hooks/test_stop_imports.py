"""The Stop hook runs after every turn: what it imports is most of what it costs.

Measured in an interpreter started with -S: this checkout's editable install imports re,
pathlib and more at start-up (its import finder), which would hide them from the check, while
a real install imports none of them before the hook does."""

from __future__ import annotations

import json
import subprocess
import sysconfig

from lore_plugin.store import Store
from tests.conftest import PYTHON, ROOT, python_env
from tests.transcripts import TranscriptWriter

PROBE = """
import sys
before = set(sys.modules)
sys.stdin = open({payload!r}, encoding="utf-8")
from lore_plugin import hooks
code = hooks.main(["stop"])
sys.stderr.write("exit %d\\n" % code + "\\n".join(sorted(set(sys.modules) - before)))
"""
# Each costs the hook milliseconds of CPU (re and json ~8 together, pathlib ~3, the Store's
# twenty modules ~3; bench/README.md, "The Stop hook, issue 27").
NOT_ON_THE_STOP_PATH = {"re", "json", "enum", "pathlib", "typing", "dataclasses", "orjson",
                        "contextlib", "tomllib", "functools", "urllib", "lore_plugin.store.database",
                        "lore_plugin.store.connection", "lore_plugin.core.config"}


def stop_imports(tmp_path) -> list[str]:
    home = tmp_path / "h"
    Store(home / "memory.db").close()  # a real watermark lookup, a real count
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.exchange(3)  # plain prompts, below the batch size: the every-turn case
    payload = tmp_path / "stop.json"
    payload.write_text(json.dumps({"session_id": "s", "transcript_path": str(writer.path),
                                   "cwd": str(tmp_path)}))
    path = f"{ROOT}:{sysconfig.get_paths()['purelib']}:{sysconfig.get_paths()['platlib']}"
    out = subprocess.run([PYTHON, "-S", "-c", PROBE.format(payload=str(payload))],
                         env=python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                                        LORE_CLAUDE_PROJECTS=str(tmp_path),
                                        PYTHONPATH=path),
                         capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    assert lines and lines[0] == "exit 0", out.stderr
    return lines[1:]


def test_the_stop_hook_imports_neither_re_json_pathlib_nor_the_store(tmp_path):
    loaded = stop_imports(tmp_path)
    assert "lore_plugin.store.peek" in loaded, " ".join(loaded)  # it read the watermark
    assert "lore_plugin.capture.lines" in loaded  # and count the pending requests
    assert sorted(set(loaded) & NOT_ON_THE_STOP_PATH) == []
    assert not [m for m in loaded if m.split(".")[0] in {"re", "json", "urllib"}]
