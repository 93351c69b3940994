"""Dates written in a fragment's text: parsed once when the text is written, kept in
fragment_dates, and used by time-aware recall like a creation date."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from lore_plugin.core import timeparse
from lore_plugin.core.types import NewFragment
from lore_plugin.store import Store

CREATED = datetime(2025, 6, 1, 12, tzinfo=UTC).timestamp()
TODAY = date(2025, 6, 1)


@pytest.mark.parametrize("text, expected", [
    ("2025-01-10 | deployed the Spark job", [("2025-01-10", "2025-01-10")]),
    ("toast-analytics | 2025-01-15 | Tools: Bash", [("2025-01-15", "2025-01-15")]),
    ("the outage in early March 2024, fixed on 3 May 2024",
     [("2024-05-03", "2024-05-03"), ("2024-03-01", "2024-03-10")]),
    ("Q1 2025 roadmap review", [("2025-01-01", "2025-03-31")]),
    ("the build broke yesterday", [("2025-05-31", "2025-05-31")]),
])
def test_the_days_and_periods_a_text_names_are_found(text, expected):
    got = [(a.isoformat(), b.isoformat()) for a, b in timeparse.written_dates(text, TODAY)]
    assert got == expected


@pytest.mark.parametrize("text", [
    "since March we deploy on Tuesdays", "before 2024 nobody used Kafka", "in 2022 we had Y",
    "ERR_2023 on port 2020 in v2.1.2023", "we may ship it", "no dates here at all",
])
def test_open_ranges_long_periods_and_numbers_date_nothing(text):
    assert timeparse.written_dates(text, TODAY) == []


def _dates(store: Store, fid: str) -> list[tuple[str, str]]:
    rows = store.execute("SELECT first_day, last_day FROM fragment_dates WHERE fragment_id = ? "
                         "ORDER BY first_day", (fid,))
    return [(date.fromordinal(a).isoformat(), date.fromordinal(b).isoformat()) for a, b in rows]


def test_insert_update_and_delete_keep_the_written_dates_in_step(tmp_path):
    store = Store(tmp_path / "m.db")
    topic = store.insert(NewFragment(content="Deploys", summary="Deploys", depth=0), CREATED)
    fid = store.insert(NewFragment(content="Deployed the Spark job; rolled back on 2025-01-12.",
                                   summary="2025-01-10 | Spark deploy", depth=1), CREATED, None,
                       topic)
    assert _dates(store, fid) == [("2025-01-10", "2025-01-10"), ("2025-01-12", "2025-01-12")]
    assert set(store.dated_near(date(2025, 1, 9).toordinal(), date(2025, 1, 10).toordinal(),
                                10)) == {fid}
    assert store.dated_near(date(2025, 2, 1).toordinal(), date(2025, 2, 5).toordinal(), 10) == {}
    store.update_text(fid, summary="Spark deploy", content="Deployed it in late April 2025.")
    assert _dates(store, fid) == [("2025-04-21", "2025-04-30")]
    store.delete(fid, CREATED)
    assert _dates(store, fid) == []


def test_fragments_stored_before_dates_were_kept_are_dated_by_the_backlog(tmp_path):
    path = tmp_path / "m.db"
    store = Store(path)
    ids = [store.insert(NewFragment(content=f"note {i}", summary=f"2025-01-{i + 10:02d} | note",
                                    depth=0), CREATED) for i in range(7)]
    # As a database migrated to schema 4 looks: no dates yet, a backlog up to its last row.
    store.execute("DELETE FROM fragment_dates")
    store.set_meta("written_dates_backlog", str(store.execute("SELECT max(rowid) FROM "
                                                              "fragments")[0][0]))
    assert store.date_written_backlog(batch=3) == 3
    assert [bool(_dates(store, f)) for f in ids] == [True] * 3 + [False] * 4
    while store.date_written_backlog(batch=3):
        pass
    assert _dates(store, ids[6]) == [("2025-01-16", "2025-01-16")]
    assert store.date_written_backlog() == 0  # done, and it stays done
    reopened = Store(path)
    assert reopened.date_written_backlog() == 0


def test_imported_fragments_are_dated_by_their_text(tmp_path):
    source = Store(tmp_path / "a.db")
    fid = source.insert(NewFragment(content="Migrated the queue on 2024-11-05.",
                                    summary="Queue migration", depth=0), CREATED)
    rows, edges = list(source.export_fragments()), list(source.export_edges())
    target = Store(tmp_path / "b.db")
    target.import_rows(rows, edges, [])
    assert _dates(target, fid) == [("2024-11-05", "2024-11-05")]


def test_a_note_stored_today_about_another_day_is_found_by_that_day(memory, clock):
    clock.now = CREATED
    memory.tz = UTC
    topic = memory.store("Work on the data platform.", "data platform", depth=0).id
    notes = {}
    for day, text in [("2025-01-10", "Deployed the new Spark job for the materialization "
                                     "pipeline."),
                      ("2025-02-03", "Investigated Datadog alerts for slow queries."),
                      ("2025-03-20", "Rotated the warehouse credentials.")]:
        notes[day] = memory.store(text, f"data platform | {day} | notes", topic, 1).id
    got = memory.query("what happened on 2025-02-03", depth=1, limit=3, reinforce=False)
    assert got.fragments[0].fragment.id == notes["2025-02-03"]
    got = memory.search("work in early January 2025", limit=3, depth=1)
    assert got.fragments[0].fragment.id == notes["2025-01-10"]
