"""The hub's schema and its refusals: create-or-migrate is idempotent, and each kind of bad
input (a wrong URL or password, no pgvector, a newer schema, an unknown space, another
embedding model) is one clear line naming the fix, with nothing changed."""

from __future__ import annotations

import hashlib
import os

import psycopg
import pytest
from psycopg import conninfo

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import (
    HubSchemaTooNew,
    HubStore,
    HubUnreachable,
    ModelMismatch,
    NoPgvector,
    UnknownSpace,
    init_hub,
)
from lore_plugin.hub.schema import SCHEMA_VERSION
from tests.hub.conftest import PASSWORD

VECTOR = b"\x00\x00\x80\x3f" * 384


def _database(hub_url: str) -> str:
    """A fresh, empty database on the session's server, as a conninfo string."""
    name = f"d{os.urandom(5).hex()}"
    with psycopg.connect(hub_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return conninfo.make_conninfo(hub_url, dbname=name)


def _shape(url: str) -> str:
    """A fingerprint of every table, column, index, constraint and version row."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT string_agg(x, E'\\n' ORDER BY x) FROM ("
            "SELECT table_name || '.' || column_name || ':' || data_type || ':' || "
            "coalesce(column_default, '') AS x FROM information_schema.columns "
            "WHERE table_schema = 'public' UNION ALL SELECT indexdef FROM pg_indexes "
            "WHERE schemaname = 'public' UNION ALL SELECT conname || pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE connamespace = 'public'::regnamespace UNION ALL "
            "SELECT 'v' || version FROM lore_schema UNION ALL SELECT 's' || name FROM spaces) s"
        ).fetchone()[0]
    return hashlib.sha256(rows.encode()).hexdigest()


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


def test_init_creates_the_schema_once_and_running_it_again_changes_nothing(hub_url):
    url = _database(hub_url)
    assert init_hub(url) == SCHEMA_VERSION
    before = _shape(url)
    assert init_hub(url) == 0
    assert _shape(url) == before


def test_a_hub_schema_from_a_newer_lore_is_refused_and_left_untouched(hub_url):
    url = _database(hub_url)
    init_hub(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO lore_schema VALUES (%s, 0)", (SCHEMA_VERSION + 1,))
    before = _shape(url)
    with pytest.raises(HubSchemaTooNew) as exc:
        HubStore(url, "personal")
    assert "newer than this Lore" in _one_line(exc) and "upgrade Lore" in str(exc.value)
    with pytest.raises(HubSchemaTooNew):
        init_hub(url)
    assert _shape(url) == before


def test_an_unknown_space_is_named_with_the_spaces_there_are(hub_url):
    with pytest.raises(UnknownSpace) as exc:
        HubStore(hub_url, "no-such-space")
    assert "no space 'no-such-space'" in _one_line(exc) and "personal" in str(exc.value)
    with pytest.raises(UnknownSpace, match="cannot name a space"):
        HubStore(hub_url, "Bad Name; DROP TABLE x", create_space=True)


def test_a_wrong_password_or_address_is_one_line_without_the_password(plain_postgres):
    host = plain_postgres.replace("lore@", "lore:not-the-password@")
    with pytest.raises(HubUnreachable) as exc:
        HubStore(host, "personal")
    text = _one_line(exc)
    assert "password authentication failed" in text and "not-the-password" not in text
    dead = plain_postgres.rsplit(":", 1)[0] + ":1/postgres"
    with pytest.raises(HubUnreachable, match="cannot connect to the hub at postgresql://lore@"):
        HubStore(dead, "personal")
    with pytest.raises(HubUnreachable, match="not valid"):
        HubStore("postgresql://lore@localhost/x?nosuchoption=1", "personal")


def test_a_server_without_pgvector_is_refused_with_the_fix(plain_postgres):
    url = plain_postgres.replace("lore@", f"lore:{PASSWORD}@")
    with pytest.raises(NoPgvector) as exc:
        init_hub(url)
    assert "install pgvector" in _one_line(exc) and "CREATE EXTENSION vector" in str(exc.value)
    with psycopg.connect(url) as conn:  # nothing was created
        assert conn.execute("SELECT to_regclass('lore_schema')").fetchone()[0] is None


def test_a_client_with_another_model_refuses_to_write_vectors_into_the_space(hub_space, hub_url):
    hub_space.insert(NewFragment(content="a", summary="a", depth=0), 1.0, embedding=VECTOR)
    other = HubStore(hub_url, hub_space.space, model="intfloat/e5-small-v2")
    try:
        with pytest.raises(ModelMismatch) as exc:
            other.insert(NewFragment(content="b", summary="b", depth=0), 1.0, embedding=VECTOR)
        assert "all-MiniLM-L6-v2" in _one_line(exc) and "e5-small-v2" in str(exc.value)
        assert hub_space.count_fragments() == 1  # the refused insert left nothing
        with pytest.raises(ModelMismatch):
            other.set_embeddings([(hub_space.topic_ids()[0], VECTOR)])
        assert other.vector_search([1.0] * 384, 5) == []  # no cosine across models
        other.insert(NewFragment(content="c", summary="c", depth=0), 1.0)  # text is fine
        with pytest.raises(ModelMismatch, match="dimensions"):
            hub_space.insert(NewFragment(content="d", summary="d", depth=0), 1.0,
                             embedding=b"\x00" * 12)
    finally:
        other.close()
    assert hub_space.space_model() == ("sentence-transformers/all-MiniLM-L6-v2", 384)
