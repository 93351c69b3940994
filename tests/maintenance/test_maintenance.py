"""doctor, export/import and forget: inspect, repair, move and prune memory safely."""

from __future__ import annotations

import subprocess

import apsw
import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.errors import InvalidInput
from lore_plugin.embedding.vector_snapshot import snapshot_path
from lore_plugin.maintenance.importing import apply_import, plan_import
from lore_plugin.maintenance.operations import doctor, export, forget
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store
from lore_plugin.store.journal import StoreJournal, journal_path
from tests.conftest import PYTHON, python_env
from tests.recall.test_memory import tree


@pytest.fixture()
def settings(tmp_path, db_path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")


def dump(db) -> list:
    store = Store(db)
    try:
        frags = store.execute("SELECT id, content, summary, depth, embedding, created_at, access_count, "
                              "superseded_by, metadata, importance, project FROM fragments ORDER BY id")
        edges = store.execute("SELECT source, target, kind, weight FROM edges ORDER BY source, target, kind")
        marks = store.execute("SELECT * FROM watermarks ORDER BY file_path")
        return [frags, edges, marks]
    finally:
        store.close()


def test_doctor_reports_a_healthy_database_as_ok(memory, settings):
    tree(memory)
    findings = doctor(settings)
    assert findings and all(f.ok for f in findings), findings


def test_doctor_finds_and_fixes_fts_drift_orphans_dangling_pointers_and_missing_vectors(
        memory, settings, embedder):
    ids = tree(memory)
    raw = apsw.Connection(str(settings.db_path))
    raw.execute("PRAGMA foreign_keys=OFF")
    raw.execute("INSERT INTO edges VALUES ('x1', ?, 'gone', 'associative', 0.5, 0)", (ids["pg"],))
    raw.execute("UPDATE fragments SET superseded_by = 'vanished' WHERE id = ?", (ids["css"],))
    raw.execute("UPDATE fragments SET embedding = NULL WHERE id = ?", (ids["react"],))
    raw.execute("INSERT INTO fragments_fts(fragments_fts, rowid, summary, content) "
                "VALUES ('delete', (SELECT rowid FROM fragments WHERE id = ?), "
                "'Tailwind only, no CSS-in-JS', "
                "'Styling uses Tailwind; no CSS-in-JS libraries are allowed.')", (ids["css"],))
    raw.close()
    broken = {f.check for f in doctor(settings) if not f.ok}
    assert broken == {"fts index", "graph", "embeddings"}

    def embed(store):
        return Memory(settings.db_path, embedder).backfill_embeddings()

    fixed = doctor(settings, fix=True, embed=embed)
    assert fixed and all(f.ok or f.fixed for f in fixed), fixed
    after = doctor(settings)
    assert after and all(f.ok for f in after), after
    assert memory.get(ids["css"]).superseded_by is None


def test_export_then_import_into_an_empty_database_loses_nothing(memory, settings, tmp_path, clock):
    ids = tree(memory)
    memory.writer.supersede(ids["vacuum"], ids["pool"], clock())
    memory.writer.link(ids["pg"], ids["react"], "associative", 0.4, clock())
    memory.writer.set_watermark("/t/a.jsonl", 999, clock())
    backup = tmp_path / "backup.jsonl"
    counts = export(settings, backup)
    assert counts == {"fragments": 8, "edges": 8, "watermarks": 1,  # 6 hierarchy + 2
                      "failures": 0, "redirects": 0}
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup)
    assert len(plan.fragments) == 8 and plan.skipped_fragments == 0
    assert not fresh.db_path.exists() or Store(fresh.db_path).count_fragments() == 0  # preview only
    apply_import(fresh, plan)
    assert dump(fresh.db_path) == dump(settings.db_path)
    again = plan_import(fresh, backup)
    assert again.fragments == [] and again.edges == [] and again.skipped_fragments == 8


def test_import_rejects_a_file_that_is_not_a_lore_export(settings, tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(InvalidInput, match="not a Lore export"):
        plan_import(settings, bad)


def test_forget_moves_children_up_and_leaves_no_trace_of_the_text(memory, settings, clock):
    ids = tree(memory)
    snapshot = snapshot_path(settings.db_path)
    snapshot.write_bytes(b"vectors of every fragment, the forgotten one too")
    gone = forget(settings, ids["vacuum"][:10], cascade=False, now=clock())
    assert gone == [ids["vacuum"]]
    assert not snapshot.exists()
    assert memory.parent(ids["detail"]).id == ids["pg"]
    memory.close()
    files = b"".join(p.read_bytes() for p in settings.db_path.parent.glob("memory.db*"))
    assert b"Autovacuum runs nightly" not in files


def test_forget_leaves_no_trace_in_the_store_journal_either(memory, settings, clock):
    """store_memory's request sat in the journal file before it was placed: forgetting the
    fragment scrubs that file and its WAL too."""
    from lore_plugin.recall.group_requests import StoreRequest
    from tests.recall.test_store_journal import raw_bytes, writer_for

    text = "The ledger's autovacuum runs at 03:17 every night on replica nine."
    writer = writer_for(memory)  # open, as the service's is: its journal keeps its WAL
    try:
        accepted = writer.accept(StoreRequest(text, "Ledger autovacuum at 03:17")).result(timeout=60)
        placed = accepted.placed.result(timeout=120)
        assert text.encode() in raw_bytes(settings.db_path)  # the copy this test is about
        forget(settings, placed.fragment.id, cascade=False, now=clock())
        files = b"".join(p.read_bytes() for p in settings.db_path.parent.glob("memory.db*"))
        assert b"03:17 every night" not in files
    finally:
        writer.close()


def test_forget_with_cascade_removes_the_whole_subtree(memory, settings, clock):
    ids = tree(memory)
    gone = forget(settings, ids["pg"], cascade=True, now=clock())
    assert set(gone) == {ids["pg"], ids["pool"], ids["vacuum"], ids["detail"]}
    store = Store(settings.db_path)
    assert store.count_fragments() == 4
    assert store.keyword_search('"ERR_7731"', 5) == []
    assert store.orphan_edges() == [] and store.fts_consistent()


def run_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_lore_remember_keeps_the_cues_it_is_given(isolated_home):
    out = run_cli("remember", "--topic", "Infra", "--cue", "how long events stay",
                  "--cue", "topic cleanup window", "We run Kafka 3.7 with seven day retention.",
                  env=python_env())
    assert out.returncode == 0, out.stderr
    store = Store(isolated_home / "memory.db", readonly=True)
    try:
        (cues,) = store.execute("SELECT cues FROM fragments WHERE depth = 1")[0]
        assert cues == "how long events stay\ntopic cleanup window"
        assert len(store.keyword_search('"cleanup"', 5)) == 1
    finally:
        store.close()


def test_the_cli_remembers_recalls_explores_and_explains_errors(tmp_path, isolated_home):
    env = python_env()
    out = run_cli("remember", "--topic", "Infra", "We run Kafka 3.7 with seven day retention.", env=env)
    assert out.returncode == 0 and "remembered [" in out.stdout
    out = run_cli("recall", "how long are events kept", env=env)
    assert "Kafka 3.7" in out.stdout
    out = run_cli("explore", "infra", env=env)
    assert out.stdout.startswith("- [") and "Kafka" in out.stdout
    assert "Infra" in run_cli("topics", env=env).stdout
    status = run_cli("status", env=env)
    assert status.returncode == 0 and "1 topic, 2 fragments" in status.stdout
    assert "optimised copy ready" in status.stdout  # made when `remember` loaded the model
    bad = run_cli("show", "zz", env=env)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and "not a fragment id" in bad.stderr
    bad = run_cli("recall", "x", "--depth", "-2", env=env)
    assert bad.returncode == 1 and "depth must be" in bad.stderr
    backup = tmp_path / "b.jsonl"
    assert run_cli("export", str(backup), env=env).returncode == 0
    preview = run_cli("import", str(backup), env=env)
    assert "would add 0 fragments" in preview.stdout and "2 fragments" in preview.stdout
    doc = run_cli("doctor", env=env)
    assert doc.returncode == 0 and "integrity" in doc.stdout


def test_an_export_says_which_acknowledged_stores_it_cannot_hold_yet(tmp_path, isolated_home):
    """A store_memory request answered at the journal commit is not a fragment until the writer
    places it: an export made in between says so instead of silently leaving it out."""
    env = python_env()
    Store(isolated_home / "memory.db").close()
    backup = tmp_path / "b.jsonl"
    out = run_cli("export", str(backup), env=env)
    assert out.returncode == 0 and "still being placed" not in out.stdout
    journal = StoreJournal(journal_path(isolated_home / "memory.db"))
    journal.add([("0123456789abcdef0123456789abcdef", None, 1.0,
                  {"content": "Deploys need two approvals.", "summary": "Deploy approvals"})])
    journal.close()
    for args in (["export", str(backup)], ["export", "--markdown", str(tmp_path / "md")]):
        out = run_cli(*args, env=env)
        assert out.returncode == 0, out.stderr
        assert "1 store(s) accepted moments ago are still being placed" in out.stdout


def test_the_cli_refuses_a_database_from_a_future_version_clearly(tmp_path, isolated_home):
    db = isolated_home / "memory.db"
    Store(db).close()
    raw = apsw.Connection(str(db))
    raw.execute("PRAGMA user_version=99")
    raw.close()
    out = run_cli("topics", env=python_env())
    assert out.returncode == 1 and "Upgrade Lore" in out.stderr and "Traceback" not in out.stderr


def test_lore_ingest_backfills_skips_what_is_done_and_retries_parked_batches(tmp_path, isolated_home):
    from tests.fake_anthropic import FakeAnthropic, text_reply
    from tests.knowledge_api import KnowledgeModel
    from tests.transcripts import TranscriptWriter

    projects = tmp_path / "projects"
    first = TranscriptWriter(projects / "-work-a" / "one.jsonl", session="one")
    first.exchange(3)
    second = TranscriptWriter(projects / "-work-b" / "two.jsonl", session="two")
    second.exchange(2, topic="search")
    sub = TranscriptWriter(projects / "-work-a" / "one" / "subagents" / "agent-x.jsonl", session="one")
    sub.user("payments rule 9 uses value 63")
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text("[ingestion]\npark_after = 1\n")
    model = KnowledgeModel()
    with FakeAnthropic(model) as api:
        # Lore's first run is this test's: the transcripts here are not under HOME's
        # ~/.claude/projects, so they are not history and ingest like any unread tail.
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url,
                         HOME=str(tmp_path / "home"))
        model.fail_next, model.failure = 1, text_reply("no tool call")  # one transcript parks
        out = run_cli("ingest", str(projects), "--yes", env=env)
        assert "2 transcripts" in out.stdout and "2 with an unread tail" in out.stdout
        assert "1 transcript(s) failed" in out.stdout
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert "parked" in run_cli("status", env=env).stdout
        again = run_cli("ingest", str(projects), "--retry-failed", "--yes", env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "1 with an unread tail" in again.stdout
        done = run_cli("ingest", str(projects), env=env)
        assert "0 with an unread tail" in done.stdout and "nothing to ingest" in done.stdout
    store = Store(isolated_home / "memory.db")
    facts = {r[0] for r in store.execute("SELECT summary FROM fragments WHERE depth = 2")}
    assert facts == {"billing rule 0 uses value 0", "billing rule 1 uses value 7",
                     "billing rule 2 uses value 14", "search rule 0 uses value 0",
                     "search rule 1 uses value 7", "payments rule 9 uses value 63"}


def test_lore_forget_is_as_thorough_as_the_viewers(memory, settings, clock):
    """`lore forget` and the viewer forget the same way: the versions a fragment superseded
    go with it, the curation journal keeps no copy of its text, and a topic is not left
    with orphaned concepts."""
    from lore_plugin.maintenance.curation import Curator

    ids = tree(memory)
    cur = Curator(memory, clock)
    cur.edit(ids["pool"], "Pool exhaustion: ERR_7731", "raise pool_size; ZEBRAQUOTA noted")
    newer = cur.correct(ids["pool"], "Pool exhaustion shows as ERR_7731", "raise pool_size to 60")
    memory.close()
    with pytest.raises(InvalidInput, match="would have no parent"):
        forget(settings, ids["db"], cascade=False, now=clock())
    gone = forget(settings, newer.id, cascade=False, now=clock())
    assert set(gone) == {newer.id, ids["pool"]}  # the corrected version went too
    store = Store(settings.db_path)
    journal = store.execute("SELECT label || undo FROM curation_journal")
    assert journal and not any("ZEBRAQUOTA" in row[0] or "ERR_7731" in row[0] for row in journal)
    store.close()
    files = b"".join(p.read_bytes() for p in settings.db_path.parent.glob("memory.db*"))
    assert b"ZEBRAQUOTA" not in files and b"pool_size to 60" not in files


def test_failure_records_travel_with_an_export_once(memory, settings, tmp_path, clock, embedder):
    """The learning loops' failure records (the patterns are drawn from them again) go out
    with the knowledge, come in once however often the file is imported, and a bad one is
    skipped with its reason while the rest imports."""
    import orjson

    from lore_plugin.capture.patterns import kind_key
    from lore_plugin.embedding.embedder import to_blob

    tree(memory)
    vector = to_blob(memory.embed_one("the wheel for numpy was missing"))
    memory.writer.add_failure_records([
        ("s1", "/work/a", "ModuleNotFoundError", kind_key("ModuleNotFoundError"),
         "the wheel for numpy was missing", "pip install numpy", vector, clock()),
        ("s2", None, "TimeoutError", kind_key("TimeoutError"), "the API call hung", None, None,
         clock() + 1)])
    backup = tmp_path / "backup.jsonl"
    assert export(settings, backup)["failures"] == 2
    with open(backup, "ab") as fh:
        fh.write(orjson.dumps({"failure": {"kind": "", "what": "x", "created_at": 1.0}}) + b"\n")
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup)
    assert len(plan.failures) == 2 and plan.problems.skipped_rows == 1
    assert any("failure kind is empty" in line for line in plan.problems.describe())
    apply_import(fresh, plan)
    rows = [r[1:] for r in Store(fresh.db_path).failure_records()]
    assert rows == [r[1:] for r in memory.writer.failure_records()]
    again = plan_import(fresh, backup)
    assert again.failures == [] and again.skipped_failures == 2


def test_doctor_reports_cue_vectors_waiting_for_the_model_and_fills_them(memory, settings,
                                                                        embedder):
    tree(memory)
    memory.store("Recharts draws the dashboard's charts", "Charts: Recharts",
                 cues="charting library for the frontend\ngraph library decision")
    (finding,) = [f for f in doctor(settings) if f.check == "cue vectors"]
    assert not finding.ok and finding.detail.startswith("1 notes'")

    def fill_cues():
        filler = Memory(settings.db_path, embedder)
        try:
            return fill_cue_vectors(filler.writer, embedder)
        finally:
            filler.close()

    (fixed,) = [f for f in doctor(settings, fix=True, fill_cues=fill_cues)
                if f.check == "cue vectors"]
    assert fixed.fixed and fixed.detail.endswith("filled 1")
    assert all(f.ok for f in doctor(settings))
