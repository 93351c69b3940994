"""Bad data from outside (an edited export, an old database, a damaged snapshot) gets a clear
report and is left out; everything else keeps working: real SQLite files, the real model."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys

import apsw
import numpy as np
import orjson
import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.relevance import relevance
from lore_plugin.embedding import vector_snapshot
from lore_plugin.maintenance.importing import apply_import, plan_import
from lore_plugin.maintenance.operations import doctor, export
from lore_plugin.recall import search
from lore_plugin.recall.memory import Memory
from lore_plugin.safety.importcheck import EMBED_BYTES
from lore_plugin.store import Store
from tests.conftest import python_env
from tests.maintenance.test_maintenance import run_cli
from tests.recall.test_memory import tree
from tests.recall.test_vector_index import big_index, exact_top


@pytest.fixture()
def settings(tmp_path, db_path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")


def read_export(path) -> tuple[bytes, list[dict]]:
    lines = path.read_bytes().splitlines()
    return lines[0], [orjson.loads(line) for line in lines[1:]]


def write_export(path, header: bytes, records: list, extra_lines: tuple[bytes, ...] = ()) -> None:
    body = [orjson.dumps(r) for r in records]
    path.write_bytes(b"\n".join([header, *body, *extra_lines]) + b"\n")


def by_summary(records: list[dict], summary: str) -> dict:
    return next(r["fragment"] for r in records if "fragment" in r
                and r["fragment"]["summary"] == summary)


def tampered_backup(memory, settings, tmp_path, clock):
    """An export of tree() with one of every kind of bad row, and the transcript it names."""
    ids = tree(memory)
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"{}\n" * 10)  # 30 bytes
    memory.writer.set_watermark(str(transcript), 30, clock())
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    header, records = read_export(backup)
    by_summary(records, "Tailwind only, no CSS-in-JS")["embedding"] = base64.b64encode(
        b"x" * 12).decode()  # the 12-byte vector that broke every search
    ui = by_summary(records, "Dashboard frontend")
    ui["relevance_score"], ui["importance"] = 99.0, 0.2  # would pin it first in the brief
    by_summary(records, "Vacuum cron file location")["depth"] = 99
    by_summary(records, "ERR_7731 means the pool is exhausted")["created_at"] = 1e12  # future
    by_summary(records, "React dashboard stack")["importance"] = 7  # clamped, not skipped
    odd = dict(by_summary(records, "Billing database"), id="../../etc/passwd")
    edge = next(r["edge"] for r in records if "edge" in r)
    records += [{"fragment": odd}, {"edge": dict(edge, id="e" * 32, kind="friend")},
                {"edge": dict(edge, id="f" * 32, kind="associative", weight=50.0)},
                {"watermark": {"file_path": str(transcript), "byte_offset": 10_000,
                               "last_processed": 1.0}},
                {"watermark": {"file_path": "relative/t.jsonl", "byte_offset": 0,
                               "last_processed": 1.0}},
                {"something": 1}, [1, 2]]
    # The export holds one watermark (30 bytes, fine); the file then says 10,000.
    write_export(backup, header, records, (b'{"fragment": {"id": ',))
    return ids, backup


def test_import_skips_each_bad_row_with_its_reason_and_imports_the_rest(memory, settings, tmp_path,
                                                                        clock, embedder):
    ids, backup = tampered_backup(memory, settings, tmp_path, clock)
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup, now=clock())
    skipped = plan.problems.skipped
    assert skipped == {
        "depth is not a whole number from 0 to 8": 1,
        "id is not a Lore id": 1,
        "edge kind is not one of associative, hierarchical, supersedes, temporal": 1,
        "watermark lies beyond the end of its transcript": 1,
        "watermark file_path is not a plain absolute path": 1,
        "a record that is none of fragment, edge, redirect, watermark or failure": 1,
        "a line that is not a JSON object": 1,
        "not JSON": 1,
        # the detail's hierarchical edge: its fragment (depth 99) was skipped
        "edge names a fragment that is neither in the file nor in the database": 1,
    }, skipped
    assert plan.problems.clamped == {"relevance_score": 1, "created_at": 1, "importance": 1,
                                     "weight": 1}
    assert plan.problems.dropped == {
        f"an embedding that is not {EMBED_BYTES:,} bytes (384 float32 values)": 1}
    described = "\n".join(plan.problems.describe())
    assert "1 skipped: depth is not a whole number from 0 to 8 (line " in described
    assert "1 kept without it: an embedding that is not 1,536 bytes" in described
    assert len(plan.fragments) == 7 and len(plan.watermarks) == 1
    apply_import(fresh, plan)

    imported = Memory(fresh.db_path, embedder, clock=clock)
    try:
        # Vector search and a new write (what every ingestion batch does) work.
        hits = imported.query("which database holds invoices", depth=1).fragments
        assert hits and hits[0].fragment.id == ids["pg"]
        imported.store("Invoices are archived after seven years.", "Invoice retention",
                       parent_id=ids["pg"], depth=2)
        ui, db = imported.get(ids["ui"]), imported.get(ids["db"])
        assert ui.relevance_score == pytest.approx(relevance(0.2, 0, ui.decay_rate,
                                                             ui.last_reinforced, clock()))
        assert [t.fragment.id for t in imported.topics()][0] == db.id
        assert imported.get(ids["react"]).importance == 1.0
        assert imported.get(ids["pool"]).created_at == clock()
        assert imported.get(ids["css"]).summary == "Tailwind only, no CSS-in-JS"
        assert imported.reader.embedding_of(ids["css"]) is None  # embedded again by doctor
    finally:
        imported.close()
    weights = Store(fresh.db_path).execute("SELECT max(weight) FROM edges")
    assert weights == [(1.0,)]


def test_the_import_command_reports_bad_rows_and_imports_the_good_ones(memory, settings, tmp_path,
                                                                       clock, isolated_home):
    _, backup = tampered_backup(memory, settings, tmp_path, clock)
    env = python_env()
    preview = run_cli("import", str(backup), env=env)
    assert preview.returncode == 0 and "Traceback" not in preview.stderr, preview.stderr
    assert "would add 7 fragments" in preview.stdout
    assert "9 bad row(s) will be skipped" in preview.stdout
    assert "1 kept without it: an embedding that is not 1,536 bytes" in preview.stdout
    done = run_cli("import", str(backup), "--yes", env=env)
    assert done.returncode == 0 and "imported" in done.stdout
    recall = run_cli("recall", "which database holds invoices", env=env)
    assert recall.returncode == 0 and "PostgreSQL" in recall.stdout, recall.stderr


def test_an_export_with_a_broken_header_is_refused_clearly(settings, tmp_path):
    from lore_plugin.core.errors import InvalidInput

    for header in (b"not json", b'{"format": "lore-export", "version": "9x"}', b"[]"):
        bad = tmp_path / "x.jsonl"
        bad.write_bytes(header + b"\n")
        with pytest.raises(InvalidInput):
            plan_import(settings, bad)


def put_raw_vector(db, fid: str, blob: bytes) -> None:
    raw = apsw.Connection(str(db))
    raw.execute("UPDATE fragments SET embedding = ? WHERE id = ?", (blob, fid))
    raw.execute("UPDATE meta SET value = value + 1 WHERE key = 'vector_epoch'")
    raw.close()


def test_search_leaves_a_wrong_length_vector_out_and_doctor_reports_and_repairs_it(
        memory, settings, embedder, caplog):
    """A database written before import checked rows: one 12-byte vector used to make every
    vector query fail with "cannot reshape array"."""
    ids = tree(memory)
    put_raw_vector(settings.db_path, ids["css"], b"x" * 12)
    with caplog.at_level(logging.WARNING):
        hits = memory.query("which database holds invoices", depth=1).fragments
    assert hits[0].fragment.id == ids["pg"]
    assert "wrong length" in caplog.text
    memory.store("The dashboard deploys from main.", "Dashboard deploys", parent_id=ids["ui"], depth=1)
    found = {f.check: f for f in doctor(settings)}
    assert not found["vectors"].ok and found["vectors"].detail.startswith("1 vectors")

    def embed(store):
        return Memory(settings.db_path, embedder).backfill_embeddings()

    fixed = {f.check: f for f in doctor(settings, fix=True, embed=embed)}
    assert fixed["vectors"].fixed and fixed["embeddings"].fixed
    assert all(f.ok for f in doctor(settings))
    hits = memory.query("Tailwind styling", depth=2).fragments
    assert hits[0].fragment.id == ids["css"]


def test_consolidation_runs_with_a_wrong_length_topic_vector(memory, settings, clock):
    from lore_plugin.consolidation.cycle import consolidate

    ids = tree(memory)
    put_raw_vector(settings.db_path, ids["ui"], b"\x00" * 100)
    store = Store(settings.db_path)
    try:
        report = consolidate(settings, store, clock)
    finally:
        store.close()
    assert report["phases"]["merge"]["topics"] == 1  # the other topic; no crash


def snapshot_arrays(path) -> vector_snapshot.Snapshot:
    snap = vector_snapshot.load(path)
    assert snap is not None
    return vector_snapshot.Snapshot(snap.epoch, snap.max_rowid, *(
        np.array(a) for a in (snap.ids, snap.rowids, snap.depths, snap.matrix, snap.scales,
                              snap.basis, snap.reduced)))


def one_column(s):
    s.matrix, s.basis = np.ascontiguousarray(s.matrix[:, :1]), np.ascontiguousarray(s.basis[:1])


def nan_in(name):
    def damage(s):
        getattr(s, name)[len(getattr(s, name)) // 2] = np.nan
    return damage


DAMAGE = {
    "width-1 matrix": one_column,
    "float matrix": lambda s: setattr(s, "matrix", s.matrix.astype(np.float32)),
    "float rowids": lambda s: setattr(s, "rowids", s.rowids.astype(np.float64)),
    "wide depths": lambda s: setattr(s, "depths", s.depths.astype(np.int64)),
    "nan in reduced": nan_in("reduced"),
    "nan in scales": nan_in("scales"),
    "nan in basis": nan_in("basis"),
    "zero scale": lambda s: s.scales.__setitem__(3, 0.0),
    "rowids out of order": lambda s: s.rowids.__setitem__(slice(0, 2), s.rowids[1::-1].copy()),
    "rowid past the header": lambda s: s.rowids.__setitem__(-1, s.max_rowid + 5),
    "short depths": lambda s: setattr(s, "depths", s.depths[:-1]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_snapshot_with_bad_arrays_is_refused_and_search_falls_back_to_sqlite(
        tmp_path, monkeypatch, caplog, damage):
    store, vectors, first = big_index(tmp_path, monkeypatch)
    snap = snapshot_arrays(first.snapshot)
    DAMAGE[damage](snap)
    assert vector_snapshot.save(first.snapshot, snap, lambda: True)
    with caplog.at_level(logging.WARNING):
        assert vector_snapshot.load(first.snapshot) is None
    assert "ignoring the vector snapshot" in caplog.text
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)
    assert fresh._snapshot_rows is None and len(fresh.ids) == 1500
    query = vectors[7]
    got = {fid for fid, _ in fresh.search(query, 10)}
    assert len(got & exact_top(vectors, query, 10)) >= 9


def test_an_intact_snapshot_still_loads_after_the_checks(tmp_path, monkeypatch):
    store, _, first = big_index(tmp_path, monkeypatch)
    assert vector_snapshot.load(first.snapshot) is not None
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)
    assert fresh._snapshot_rows == 1500


def test_a_vector_with_values_that_are_not_finite_is_dropped_and_the_fragment_kept(
        memory, settings, tmp_path, clock):
    ids = tree(memory)
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    header, records = read_export(backup)
    poisoned = np.zeros(384, dtype="<f4")
    poisoned[5] = np.nan  # one NaN makes every cosine with this row NaN
    by_summary(records, "Nightly autovacuum on invoices")["embedding"] = base64.b64encode(
        poisoned.tobytes()).decode()
    by_summary(records, "React dashboard stack")["embedding"] = "not base64 at all!"
    write_export(backup, header, records)
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup, now=clock())
    assert plan.problems.skipped_rows == 0 and len(plan.fragments) == 8
    assert plan.problems.dropped == {"an embedding with values that are not finite": 1,
                                     "an embedding that is not base64 text": 1}
    apply_import(fresh, plan)
    store = Store(fresh.db_path)
    try:
        assert store.embedding_of(ids["vacuum"]) is None and store.embedding_of(ids["react"]) is None
        assert store.embedding_of(ids["pg"]) == memory.reader.embedding_of(ids["pg"])
    finally:
        store.close()


SECRET = "sk-ant-api03-" + "A" * 90


def test_an_imported_rows_metadata_and_project_are_redacted_and_export_passes_none_out(
        memory, settings, tmp_path, clock):
    ids = tree(memory)
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    header, records = read_export(backup)
    pg = by_summary(records, "PostgreSQL for invoices")
    pg["metadata"] = {"note": f"the key is {SECRET}", SECRET: [1, {"deep": SECRET}]}
    pg["project"] = f"/work/{SECRET}"
    write_export(backup, header, records)
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    apply_import(fresh, plan_import(fresh, backup, now=clock()))
    row = Store(fresh.db_path).execute("SELECT metadata, project FROM fragments WHERE id = ?",
                                       (ids["pg"],))
    assert SECRET not in repr(row) and "the key is" in row[0][0], row
    # A row kept before every write was redacted goes out scrubbed.
    memory.writer.execute("UPDATE fragments SET metadata = ?, project = ? WHERE id = ?",
                          (orjson.dumps({"token": SECRET}).decode(), f"/p/{SECRET}", ids["css"]))
    memory.writer.add_failure_records([(SECRET, f"/q/{SECRET}", "test", "test", "it broke",
                                        None, None, clock())])
    out = tmp_path / "out.jsonl"
    export(settings, out)
    assert SECRET not in out.read_text() and '"token"' in out.read_text()


def test_an_import_that_would_loop_the_hierarchy_or_the_versions_is_refused(
        memory, settings, tmp_path, clock):
    ids = tree(memory)
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    header, records = read_export(backup)
    by_summary(records, "Nightly autovacuum on invoices")["superseded_by"] = ids["pool"]
    by_summary(records, "ERR_7731 means the pool is exhausted")["superseded_by"] = ids["vacuum"]
    records += [{"edge": {"id": "c" * 32, "source": ids["css"], "target": ids["ui"],  # C→A
                          "kind": "hierarchical", "weight": 1.0, "created_at": 1.0}},
                {"edge": {"id": "d" * 32, "source": ids["react"], "target": ids["pool"],
                          "kind": "hierarchical", "weight": 1.0, "created_at": 1.0}}]
    write_export(backup, header, records)
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup, now=clock())
    assert plan.problems.skipped == {
        "edge would close a loop in the hierarchy (a fragment its own ancestor)": 1,
        "edge gives a fragment a second parent": 1}
    assert plan.problems.dropped == {"a superseded_by that would close a loop of versions": 1}
    apply_import(fresh, plan)
    store = Store(fresh.db_path)
    assert store.hierarchy_cycles() == [] and store.supersession_cycles() == []
    assert store.ancestors(ids["css"]) == [ids["react"], ids["ui"]]
    assert store.parent_id(ids["pool"]) == ids["pg"]
    assert len(store.supersession_links()) == 1
    # Importing the same file again into the database that holds the first half of the loop.
    again = plan_import(fresh, backup, now=clock())
    assert again.edges == [] and again.fragments == []


def test_a_line_over_the_import_limit_is_skipped_without_being_read_whole(settings, tmp_path):
    """A 64 MiB line (past MAX_LINE, 16 MiB) costs the import at most a few pieces of it."""
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.write(b'{"format": "lore-export", "version": 1}\n{"fragment": {"content": "')
        for _ in range(64):
            fh.write(b"a" * (1 << 20))
        fh.write(b'"}}\n{"watermark": {"file_path": "/t/a.jsonl", "byte_offset": 0, '
                 b'"last_processed": 1.0}}\n')
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from lore_plugin.core.config import Settings\n"
        "from lore_plugin.maintenance.importing import plan_import\n"
        "settings = Settings(db_path=Path(sys.argv[1]), home=Path(sys.argv[2]))\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "plan = plan_import(settings, Path(sys.argv[3]))\n"
        "grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grew // 1024, len(plan.watermarks), *plan.problems.describe(), sep='\\n')\n")
    out = subprocess.run([sys.executable, "-c", script, str(settings.db_path),
                          str(settings.home), str(big)], env=python_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    grew_mb, marks, reason = out.stdout.splitlines()
    assert reason == ("1 skipped: a line longer than 16 MiB (the import limit per line; it was "
                      "not read) (line 2)")
    assert marks == "1"  # the line after it still imports
    assert int(grew_mb) < 48, f"the import grew by {grew_mb} MB"  # 193 MB before the bound


def test_the_preview_counts_a_row_the_file_repeats_once(memory, settings, tmp_path, clock):
    ids = tree(memory)
    memory.writer.set_watermark("/t/a.jsonl", 10, clock())
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    header, records = read_export(backup)
    edge = next(r["edge"] for r in records if "edge" in r)
    records += [{"fragment": by_summary(records, "Billing database")},
                {"edge": dict(edge)}, {"edge": dict(edge, id="e" * 32)},
                {"watermark": {"file_path": "/t/a.jsonl", "byte_offset": 20,
                               "last_processed": 1.0}}]
    write_export(backup, header, records)
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup, now=clock())
    assert (len(plan.fragments), len(plan.edges), len(plan.watermarks)) == (8, 6, 1)
    assert plan.problems.skipped == {"a fragment id that an earlier line gave already": 1,
                                     "an edge that an earlier line gave already": 2}
    assert plan.watermarks[0]["byte_offset"] == 20
    apply_import(fresh, plan)
    assert Store(fresh.db_path).count_fragments() == 8 == len(ids)
