"""Redirects (ids store_memory gave out for a store that repeated a fragment, schema 9) in an
export → import round trip, and imported redirect rows checked like any imported row."""

from __future__ import annotations

import orjson
import pytest

from lore_plugin.core.config import Settings
from lore_plugin.maintenance.importing import apply_import, plan_import
from lore_plugin.maintenance.operations import FORMAT, VERSION, export
from lore_plugin.store import Store, new_id
from tests.recall.test_memory import tree


@pytest.fixture()
def settings(tmp_path, db_path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")


def test_a_redirect_survives_an_export_and_import_round_trip(memory, settings, tmp_path):
    ids = tree(memory)
    reserved = new_id()
    memory.writer.redirect(reserved, ids["pg"])
    backup = tmp_path / "backup.jsonl"
    assert export(settings, backup)["redirects"] == 1
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    plan = plan_import(fresh, backup)
    assert plan.redirects == [{"id": reserved, "target": ids["pg"]}]
    apply_import(fresh, plan)
    store = Store(fresh.db_path)
    try:
        assert store.resolve_id(reserved) == ids["pg"]  # the id the caller holds still works
    finally:
        store.close()
    again = plan_import(fresh, backup)
    assert again.redirects == [] and again.skipped_redirects == 1


def test_imported_redirects_are_checked_and_bad_ones_skipped_with_a_reason(
        memory, settings, tmp_path):
    ids = tree(memory)
    frag = orjson.loads(next(line for line in _export_lines(settings, tmp_path)
                             if b'"fragment"' in line))["fragment"]
    good, unknown, dup = new_id(), new_id(), new_id()
    records = [
        {"fragment": frag},
        {"redirect": {"id": good.upper(), "target": ids["pg"]}},  # kept, id lowercased
        {"redirect": {"id": "not-an-id", "target": ids["pg"]}},
        {"redirect": {"id": unknown, "target": new_id()}},  # a target nowhere
        {"redirect": {"id": frag["id"], "target": ids["pg"]}},  # a fragment's own id
        {"redirect": {"id": dup, "target": dup}},  # to itself
        {"redirect": {"id": good, "target": ids["react"]}},  # the same id twice
        {"redirect": ["a", "list"]},
    ]
    source = tmp_path / "crafted.jsonl"
    source.write_bytes(b"\n".join([orjson.dumps({"format": FORMAT, "version": VERSION})]
                                  + [orjson.dumps(r) for r in records]) + b"\n")
    fresh = Settings(db_path=tmp_path / "fresh.db", home=settings.home)
    Store(fresh.db_path).close()  # an empty database: pg and react are not in it
    plan = plan_import(settings, source)  # into the database that holds pg and react
    assert plan.redirects == [{"id": good, "target": ids["pg"]}]
    reasons = "\n".join(plan.problems.describe())
    for why in ("redirect id is not a Lore id", "redirect target is neither",
                "redirect points to itself", "redirect id that an earlier line gave",
                "redirect is not a JSON object"):
        assert why in reasons, reasons
    assert plan.problems.skipped_rows == 5
    assert plan.skipped_redirects == 1  # a fragment's own id here: known already, not taken
    apply_import(settings, plan)
    store = Store(settings.db_path)
    try:
        assert store.resolve_id(good) == ids["pg"]
        assert store.resolve_id(frag["id"]) == frag["id"]  # a fragment's id never redirected
    finally:
        store.close()
    elsewhere = plan_import(fresh, source)  # targets in neither the file nor that database
    assert elsewhere.redirects == []
    assert "redirect id is a fragment's own id in the file" in "\n".join(
        elsewhere.problems.describe())


def _export_lines(settings: Settings, tmp_path) -> list[bytes]:
    out = tmp_path / "plain.jsonl"
    export(settings, out)
    return out.read_bytes().splitlines()


def test_a_short_id_shared_by_repeats_resolves_when_they_name_one_fact_and_is_ambiguous_else(
        memory):
    from lore_plugin.core.errors import AmbiguousId

    ids = tree(memory)
    prefix = "abcdef12"  # ids no fragment has: hex, as store_memory reserves them
    memory.writer.redirect(prefix + "0" * 24, ids["pg"])
    memory.writer.redirect(prefix + "1" * 24, ids["pg"])
    assert memory.reader.resolve_id(prefix) == ids["pg"]  # two repeats of one fact
    memory.writer.redirect(prefix + "2" * 24, ids["vacuum"])
    with pytest.raises(AmbiguousId, match="several"):
        memory.reader.resolve_id(prefix)
    assert memory.reader.resolve_id(prefix + "2") == ids["vacuum"]
