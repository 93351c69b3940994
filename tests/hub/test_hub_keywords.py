"""The hub's keyword search (issue 28): its narrow table follows every write, an existing
hub gets it by `lore hub init`, and a large space reads only its rarest terms' matches while
each candidate keeps the score the full search gives it."""

from __future__ import annotations

import os
import time

import psycopg
from psycopg import conninfo

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, bootstrap, init_hub, keywords, term_counts
from lore_plugin.hub.schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE
from lore_plugin.hub.words_sql import TABLE
from lore_plugin.store import Store


def _words(store: HubStore) -> dict[str, str]:
    """{id: tsvector} of the space in the narrow table, as the admin sees it."""
    return {r[0]: r[1] for r in store._all(f"SELECT id, tsv::text FROM {TABLE} WHERE space = %s",
                                           (store.space,))}


def _counts_agree(store: HubStore) -> bool:
    """Every lexeme's kept count equals the fragments of the space holding it now."""
    kept = dict(store._all("SELECT lexeme, sum(change) FROM lexeme_counts WHERE space = %s "
                           "GROUP BY lexeme HAVING sum(change) <> 0", (store.space,)))
    live = dict(store._all("SELECT x, count(*) FROM fragment_words, "
                           "unnest(tsvector_to_array(tsv)) AS x WHERE space = %s GROUP BY x",
                           (store.space,)))
    return kept == live


def _found(store: HubStore, match: str) -> list[str]:
    return [f.id for f, _ in store.keyword_search(match, 10)]


def test_the_words_and_counts_follow_every_write_of_a_fragment(hub_space, monkeypatch):
    monkeypatch.setattr(term_counts, "COUNTS_TTL", 0.0)  # each count read from the database
    now = time.time()
    fid = hub_space.insert(NewFragment(content="the gateway retries", summary="Gateway",
                                       depth=0), now)
    assert _found(hub_space, '"gateway"') == [fid]
    hub_space.update_text(fid, summary="Billing", content="invoices go out monthly")
    assert _found(hub_space, '"gateway"') == [] and _found(hub_space, '"invoices"') == [fid]
    tsv = hub_space._one("SELECT lore_words(summary, content, cues)::text FROM fragments "
                         "WHERE space = %s AND id = %s", (hub_space.space, fid))
    assert _words(hub_space) == {fid: tsv} and _counts_agree(hub_space)
    hub_space.confirm([fid], now)  # a change of no text leaves the words as they are
    assert _words(hub_space) == {fid: tsv}
    hub_space.delete(fid, now)
    assert _words(hub_space) == {} and _found(hub_space, '"invoices"') == []
    assert _counts_agree(hub_space)
    assert hub_space.term_statistics(["invoices"])[1] == {"invoices": (frozenset({"invoic"}), 0)}


def test_a_push_writes_the_words_of_every_row_it_adds(tmp_path, hub_space):
    local = Store(tmp_path / "local.db")
    for n in range(30):
        code = " after ERR_7731" if n < 3 else ""  # a phrase of two lexemes: counted apart
        local.insert(NewFragment(content=f"note {n} about kafka{code}", summary=f"note {n}",
                                 depth=1), 1.0)
    rows = list(local.export_fragments())
    local.close()
    assert hub_space.insert_rows(rows, []) == (30, 0)
    assert len(_words(hub_space)) == 30 and len(_found(hub_space, '"kafka"')) == 10
    assert _counts_agree(hub_space)
    assert hub_space.phrase_counts(["kafka", "note", "err_7731"]) == {
        "kafka": 30, "note": 30, "err_7731": 3}


def _old_hub(url: str) -> None:
    """A hub as the Lore before this migration left it: versions 1 to 5."""
    with psycopg.connect(url, autocommit=True) as conn:
        bootstrap.ensure_pgvector(conn, url)
        conn.execute(f"CREATE TABLE {VERSION_TABLE} (version integer PRIMARY KEY, "
                     "applied_at double precision NOT NULL)")
        for version, sql in enumerate(MIGRATIONS[:5], start=1):
            with conn.transaction():
                conn.execute(sql)
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (%s, 0)", (version,))
        conn.execute("INSERT INTO spaces (name, created_at) VALUES ('personal', 0)")
        conn.execute("INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                     "last_accessed, last_reinforced) VALUES ('personal', 'f00d', "
                     "'the kafka consumer lags', 'Consumer lag', 1, 0, 0, 0)")


def test_lore_hub_init_migrates_an_existing_hub_once_and_keeps_its_fragments_findable(hub_url):
    name = f"d{os.urandom(5).hex()}"
    with psycopg.connect(hub_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = conninfo.make_conninfo(hub_url, dbname=name)
    _old_hub(url)
    assert init_hub(url) == SCHEMA_VERSION - 5
    store = HubStore(url, "personal")
    try:
        assert store._one(f"SELECT max(version) FROM {VERSION_TABLE}") == SCHEMA_VERSION
        assert _found(store, '"kafka" OR "nothing"') == ["f00d"]
        assert init_hub(url) == 0  # running it again changes nothing
        assert len(_words(store)) == 1 and _counts_agree(store)
    finally:
        store.close()


def test_the_driving_terms_are_the_rarest_within_the_budget_and_at_least_one():
    docs = {"common": 900, "rare": 3, "absent": 0, "middle": 50}
    assert keywords.driving_terms(docs, budget=60) == ["rare", "middle"]
    assert keywords.driving_terms(docs, budget=10) == ["rare"]
    assert keywords.driving_terms({"common": 900}, budget=10) == ["common"]
    assert keywords.driving_terms({"absent": 0}, budget=10) == []


def test_past_the_budget_only_fragments_with_a_rare_term_are_read_and_scored_in_full(
        hub_space, monkeypatch):
    now = time.time()
    both = hub_space.insert(NewFragment(content="kafka rebalances stall the consumer",
                                        summary="Kafka rebalances", depth=1), now)
    common = [hub_space.insert(NewFragment(content=f"the consumer number {n}",
                                           summary=f"Consumer {n}", depth=1), now)
              for n in range(6)]
    match = '"rebalances" OR "consumer"'
    full = dict((f.id, s) for f, s in hub_space.keyword_search(match, 10))
    assert set(full) == {both, *common}
    monkeypatch.setattr(keywords, "DRIVE_BUDGET", 3)  # "consumer" (7) is past it
    capped = dict((f.id, s) for f, s in hub_space.keyword_search(match, 10))
    assert capped == {both: full[both]}  # the same score: "consumer" still counted in it


def test_a_lexeme_of_many_rows_is_folded_into_one_and_keeps_its_count(hub_space, monkeypatch):
    monkeypatch.setattr(term_counts, "FOLD_FROM", 3)
    monkeypatch.setattr(term_counts, "COUNTS_TTL", 0.0)
    for n in range(6):  # one insert each: a row of +1 each
        hub_space.insert(NewFragment(content=f"kafka lag {n}", summary="Kafka", depth=1), 1.0)

    def rows() -> int:
        return int(hub_space._one("SELECT count(*) FROM lexeme_counts WHERE space = %s AND "
                                  "lexeme = 'kafka'", (hub_space.space,)))

    assert rows() == 6
    assert hub_space.phrase_counts(["kafka"]) == {"kafka": 6}  # read, then folded
    assert rows() == 1 and _counts_agree(hub_space)
    hub_space.insert(NewFragment(content="kafka again", summary="Kafka", depth=1), 1.0)
    assert hub_space.phrase_counts(["kafka"]) == {"kafka": 7} and _counts_agree(hub_space)


def test_a_term_held_by_more_rows_than_the_cached_count_still_searches(hub_space, monkeypatch):
    # The row count is cached for ROWS_TTL while term counts are read fresh: in a space that
    # grew within the minute a term is held by more rows than "all the rows", and the
    # search's ln((N - d + 0.5) / (d + 0.5)) was given a negative number and failed.
    monkeypatch.setattr(term_counts, "COUNTS_TTL", 0.0)
    now = time.time()
    first = hub_space.insert(NewFragment(content="the gateway retries", summary="Gateway",
                                         depth=0), now)
    assert _found(hub_space, '"gateway"') == [first]  # caches N = 1
    later = [hub_space.insert(NewFragment(content=f"gateway note {i}", summary=f"Note {i}",
                                          depth=0), now) for i in range(3)]
    assert sorted(_found(hub_space, '"gateway"')) == sorted([first, *later])
    rows, stats = hub_space.term_statistics(["gateway"])
    assert rows == 1 and stats["gateway"][1] == 4  # the stale count the search must survive
