"""Cues in the local store (schema 10, core/cues.py): the phrases a note may be asked for by
are kept beside it, redacted, searched as its words and carried by export and import. Real
SQLite files; the real model where recall runs."""

from __future__ import annotations

import json

import apsw

from lore_plugin.core.config import Settings
from lore_plugin.core.types import NewFragment
from lore_plugin.maintenance.importing import apply_import, plan_import
from lore_plugin.maintenance.operations import export
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store
from lore_plugin.store.schema import MIGRATIONS, SCHEMA_VERSION

SECRET = "AKIA" + "L0REFAKE7Q9Z2B4W"
NOTE = NewFragment(content="To run atlas locally use `make dev`; it starts the API on port 8080.",
                   summary="Running atlas locally", depth=2,
                   cues="start backend on my machine\nlocal development server\nspin up the api")


def make_version_9_database(path, rows: int = 40) -> None:
    """A database as schema 9 left it: the keyword index on summary and content only."""
    conn = apsw.Connection(str(path))
    for version, sql in enumerate(MIGRATIONS[:9], start=1):
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version={version}")
    for i in range(rows):
        conn.execute("INSERT INTO fragments (id, content, summary, depth, created_at, "
                     "last_accessed, last_reinforced) VALUES (?, ?, ?, 2, 1, 1, 1)",
                     (f"{i:032x}", f"Service {i} listens on port {9000 + i} behind nginx.",
                      f"Port of service {i}"))
    conn.close()


def matched(store: Store, match: str) -> list[str]:
    return sorted(f.id for f, _ in store.keyword_search(match, 100))


def test_a_version_9_database_keeps_every_row_and_its_matches_and_its_cues_become_searchable(
        tmp_path):
    path = tmp_path / "old.db"
    make_version_9_database(path)
    raw = apsw.Connection(str(path))
    before = {m: sorted(r[0] for r in raw.execute(
        "SELECT f.id FROM fragments_fts JOIN fragments f ON f.rowid = fragments_fts.rowid "
        "WHERE fragments_fts MATCH ?", (m,))) for m in ('"nginx"', '"9007"', '"port"')}
    raw.close()
    store = Store(path)
    try:
        assert store.user_version() == SCHEMA_VERSION >= 10
        assert store.count_fragments() == 40
        assert {m: matched(store, m) for m in before} == before
        assert len(before['"nginx"']) == 40 and before['"9007"'] == [f"{7:032x}"]
        assert store.fts_consistent() and store.integrity_check() == ["ok"]
        assert store.get(f"{3:032x}").cues == ""
        assert matched(store, '"reverse"') == []
        store.update_text(f"{3:032x}", cues="reverse proxy setup")  # the update trigger
        assert matched(store, '"reverse"') == [f"{3:032x}"]
        assert store.fts_consistent()
    finally:
        store.close()


def test_a_note_is_found_by_a_cue_word_its_text_does_not_hold(tmp_path):
    store = Store(tmp_path / "memory.db")
    try:
        fid = store.insert(NOTE, now=1.0)
        other = store.insert(NewFragment(content="Backend tests run with pytest -x.",
                                         summary="Backend tests", depth=2), now=1.0)
        assert "machine" not in (NOTE.summary + NOTE.content)
        assert matched(store, '"machine"') == [fid]
        assert matched(store, '"backend"') == sorted([fid, other])
        assert store.get(fid).cues == NOTE.cues
        # the per-prompt hook's keyword coverage counts cue words as the note's own
        assert {"machin", "spin"} <= store.fragment_tokens([fid])[fid]
        store.delete(fid, now=2.0)  # the delete trigger takes its cues out of the index
        assert matched(store, '"machine"') == [] and store.fts_consistent()
    finally:
        store.close()


def test_memory_query_finds_a_note_by_its_cues(tmp_path, embedder, clock):
    """The question shares no word with the note: its cues make it the first answer, and the
    same memory without them does not."""
    question = "how do I boot the stack on my laptop"
    firsts = {}
    for cues in ("boot the stack on my laptop\nwhich command for dev", ""):
        memory = Memory(tmp_path / f"m{len(cues)}.db", embedder, clock=clock,
                        project="/work/atlas")
        try:
            topic = memory.store("Work on the atlas service.", "Atlas", depth=0)
            concept = memory.store("How atlas is run.", "Running atlas", topic.id, 1)
            for content, summary in [
                    ("Deploys go out through Argo CD on merge to main.", "Atlas deploys"),
                    ("The fleet gets OS updates on Mondays.", "OS updates"),
                    ("Invoices are kept for seven years.", "Invoice retention")]:
                memory.store(content, summary, concept.id, 2)
            note = memory.store(NOTE.content, NOTE.summary, concept.id, 2, cues=cues)
            found = memory.query(question, depth=2, limit=3, reinforce=False)
            firsts[bool(cues)] = found.fragments[0].fragment.id == note.id
        finally:
            memory.close()
    assert firsts == {True: True, False: False}


def test_a_secret_in_a_cue_never_reaches_the_database(tmp_path):
    path = tmp_path / "memory.db"
    store = Store(path)
    try:
        fid = store.insert(NewFragment(content="The deploy bot pushes images.",
                                       summary="Deploy bot", depth=2,
                                       cues=f"deploy key {SECRET}\nimage push"), now=1.0)
        store.update_text(fid, cues=f"bucket key {SECRET}\nimage push")
        (cues,) = store.execute("SELECT cues FROM fragments WHERE id = ?", (fid,))[0]
        assert SECRET not in cues and "[REDACTED" in cues and "image push" in cues
        store.checkpoint()
    finally:
        store.close()
    assert SECRET.encode() not in path.read_bytes()


def test_export_then_import_carries_the_cues(tmp_path):
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")
    store = Store(settings.db_path)
    fid = store.insert(NOTE, now=1.0)
    plain = store.insert(NewFragment(content="No cues here.", summary="Plain", depth=2), now=1.0)
    store.close()
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    rows = [json.loads(line)["fragment"] for line in backup.read_text().splitlines()[1:]]
    assert {r["id"]: r["cues"] for r in rows} == {fid: NOTE.cues, plain: ""}
    # A row from an export made before cues (no key) and one with cues too long for a note.
    older = dict(rows[1], id="ab" * 16)
    del older["cues"]
    huge = dict(rows[1], id="cd" * 16, cues="x" * 5000)
    backup.write_text(backup.read_text() + json.dumps({"fragment": older}) + "\n"
                      + json.dumps({"fragment": huge}) + "\n")
    other = Settings(db_path=tmp_path / "other.db", home=tmp_path / "h2")
    plan = plan_import(other, backup)
    assert "1 kept without it: cues longer than 648 characters" in plan.problems.describe()
    apply_import(other, plan)
    copy = Store(other.db_path)
    try:
        assert copy.get(fid).cues == NOTE.cues and copy.get("ab" * 16).cues == ""
        assert copy.get("cd" * 16).cues == ""  # the row kept, its cues left out
        assert matched(copy, '"machine"') == [fid]
    finally:
        copy.close()
