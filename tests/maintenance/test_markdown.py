"""`lore export --markdown DIR`: one owner-only, redacted, Obsidian-friendly file per topic that
says it is a read-only view, and that drops topics memory has forgotten."""

from __future__ import annotations

import os
import subprocess

import yaml

from lore_plugin.core.config import load_settings
from lore_plugin.maintenance.curation import Curator
from lore_plugin.maintenance.markdown import MARK, export_markdown
from lore_plugin.recall.memory import Memory
from tests.conftest import PYTHON, python_env
from tests.recall.test_memory import tree

SECRET = "sk-ant-api03-" + "A" * 90


def front_matter(text: str) -> dict:
    head = text.split("---\n", 2)[1]
    return yaml.safe_load(head)


def test_each_topic_becomes_one_file_with_front_matter_headings_bullets_and_links(
        isolated_home, embedder, clock, tmp_path):
    settings = load_settings()
    memory = Memory(settings.db_path, embedder, clock=clock)
    ids = tree(memory)
    memory.writer.upsert_associative([(ids["pg"], ids["react"], 0.5)], clock())
    memory.close()
    out = tmp_path / "mirror"
    assert export_markdown(settings, out) == 2
    files = {p.name: p.read_text() for p in out.glob("*.md")}
    billing = next(t for n, t in files.items() if n.startswith("Billing-database-"))
    dash_name = next(n for n in files if n.startswith("Dashboard-frontend-"))[:-3]
    meta = front_matter(billing)
    assert meta["id"] == ids["db"] and meta["title"] == "Billing database"
    assert meta["fragments"] == 4 and meta["created"] and meta["updated"]
    assert meta["lore-export"] == "read-only view"
    assert "Read-only view of Lore's memory" in billing.split("# Billing database")[0]
    assert "\n# Billing database\n" in billing
    assert "\n## PostgreSQL for invoices\n" in billing
    assert "- **ERR_7731 means the pool is exhausted** — Connection pool exhaustion" in billing
    assert "  - **Vacuum cron file location**" in billing  # a detail nests under its fact
    assert f"[[{dash_name}#React dashboard stack]]" in billing  # the association, as a link


def test_the_mirror_is_owner_only_redacted_and_forgets_with_memory(isolated_home, embedder,
                                                                     clock, tmp_path):
    settings = load_settings()
    memory = Memory(settings.db_path, embedder, clock=clock)
    ids = tree(memory)
    # A row kept before writes were redacted, as an old database may hold.
    memory.writer.execute("UPDATE fragments SET content = ? WHERE id = ?",
                          (f"the key is {SECRET}", ids["css"]))
    out = tmp_path / "mirror"
    os.umask(0o022)  # even a loose umask must not make the mirror readable by others
    try:
        export_markdown(settings, out)
    finally:
        os.umask(0o077)
    assert os.stat(out).st_mode & 0o077 == 0
    assert all(os.stat(p).st_mode & 0o077 == 0 for p in out.iterdir())
    text = "".join(p.read_text() for p in out.glob("*.md"))
    assert SECRET not in text and "the key is" in text
    mine = out / "notes-of-my-own.md"
    mine.write_text("my own note, not Lore's")
    Curator(memory).forget(ids["ui"], with_children=True)
    memory.close()
    assert export_markdown(settings, out) == 1
    names = sorted(p.name for p in out.glob("*.md"))
    assert names[0].startswith("Billing-database-") and names[1] == mine.name
    assert all(MARK in p.read_text() for p in out.glob("Billing*.md"))


def test_lore_export_takes_a_file_or_markdown_but_not_both(isolated_home, tmp_path):
    env = python_env()
    both = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "export", str(tmp_path / "x.jsonl"),
                           "--markdown", str(tmp_path / "md")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert both.returncode == 1 and "not both" in both.stderr and "Traceback" not in both.stderr
    md = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "export", "--markdown",
                         str(tmp_path / "md")], env=env, capture_output=True, text=True,
                        timeout=60)
    assert md.returncode == 0 and "0 topic files" in md.stdout


def test_html_in_memory_is_written_escaped_so_a_viewer_shows_it_and_runs_nothing(
        isolated_home, embedder, clock, tmp_path):
    settings = load_settings()
    memory = Memory(settings.db_path, embedder, clock=clock)
    topic = memory.store("Web <b>pages</b>", "Pages <script>alert(1)</script>", depth=0).id
    concept = memory.store("<img src=x onerror=alert(2)> shows the bug",
                           "Broken <img src=x onerror=alert(3)> images", parent_id=topic,
                           depth=1).id
    memory.store("Use <iframe src=javascript:alert(4)></iframe> & nothing else",
                 "<svg onload=alert(5)> icons", parent_id=concept, depth=2)
    memory.close()
    out = tmp_path / "mirror"
    export_markdown(settings, out)
    text = next(out.glob("*.md")).read_text()
    body = text.split("---\n", 2)[2]  # front matter is YAML data, shown as properties
    for tag in ("<script", "<img", "<iframe", "<svg", "<b>"):
        assert tag not in body, tag
    assert "&lt;img src=x onerror=alert(2)&gt; shows the bug" in body
    assert "**&lt;svg onload=alert(5)&gt; icons**" in body and "&amp; nothing else" in body
    assert "\n# Pages  script alert(1) /script\n" in body  # a heading drops < and > instead
