"""`lore hub` behind the command line: what the hub holds, and copying knowledge between the
local file and a hub space with its ids kept (issue 28).

A push copies every local fragment and edge the space lacks; the space keeps a row it already
has, so a second push adds nothing and an interrupted one is finished by running it again.
Local rows still keyed by a repository's path move to its remote key first, so the space
holds the key every machine computes. A pull is the reverse, into the local file, for work
offline. Nothing local is written before the hub has answered: a wrong URL or password, a
server without pgvector, a newer schema or an unknown space stop the command first.

Cue vectors follow each chunk where the other side has them (cue_vector_carry.py); a push
given the model then embeds what is still due (best effort after its commits: a failure
leaves them due for the next writer with the model, recall/cue_vector_upkeep.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..capture.hub_link import conninfo, open_store
from ..capture.project_keys import adopt_remote_keys
from ..core.config import Settings
from ..recall.cue_vector_upkeep import fill_after_write
from ..store import Store
from .cue_vector_carry import carry_cue_vectors, lacking_locally

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

CHUNK = 5000  # rows read and sent at a time: memory stays flat at any size
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class HubState:
    url: str  # without a password
    version: int
    spaces: dict[str, int]  # space -> fragments


@dataclass(frozen=True)
class Plan:
    space: str
    source: int  # fragments the side copied from holds
    target: int  # fragments the side copied to holds now
    missing: int  # of the source's, those the target lacks
    edges: int  # edges of the source


@dataclass(frozen=True)
class Copied:
    fragments: int
    edges: int
    cue_vectors: int = 0  # notes whose cue vectors came along or were embedded


def init(settings: Settings, url: str, spaces: tuple[str, ...]) -> tuple[int, HubState]:
    """Creates or migrates the hub's schema and `spaces`; (migrations run, the hub after)."""
    from ..hub import init_hub

    ran = init_hub(url, spaces)
    return ran, state(url)


def state(url: str) -> HubState:
    from ..hub import bootstrap

    with bootstrap.connect(url) as conn:
        version = bootstrap.schema_version(conn)
        bootstrap.refuse_newer(version, url)
        sizes = {name: int(n) for name, n in conn.execute(
            "SELECT s.name, (SELECT count(*) FROM fragments f WHERE f.space = s.name) "
            "FROM spaces s ORDER BY s.name").fetchall()} if version else {}
    return HubState(bootstrap.display(url), version, sizes)


def hub_state(settings: Settings) -> HubState:
    return state(conninfo(settings))


def _chunks(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    it = iter(rows)
    while chunk := list(itertools.islice(it, CHUNK)):
        yield chunk


def _missing(ids: list[str], present: Callable[[list[str]], dict[str, Any]]) -> int:
    return sum(len(part) - len(present(part)) for part in
               (ids[i:i + 1000] for i in range(0, len(ids), 1000)))


def plan_push(settings: Settings, local: Store, space: str) -> Plan:
    hub = open_store(settings, space)  # refuses first: unreachable, unknown space, schema
    try:
        adopt_remote_keys(local)
        ids = [row["id"] for row in local.export_fragments()]
        return Plan(space, len(ids), hub.count_fragments(),
                    _missing(ids, lambda part: hub.get_many(part, with_text=False,
                                                            with_parent=False)),
                    local.counts()["edges"])
    finally:
        hub.close()


def push(settings: Settings, local: Store, space: str, progress: Progress | None = None,
         embedder: Embedder | None = None) -> Copied:
    hub = open_store(settings, space)
    try:
        adopt_remote_keys(local)
        total = local.count_fragments()
        done = added = carried = 0
        # At least this many are new: a large first push builds the vector index once.
        with hub.bulk_load(total - hub.count_fragments()):
            for chunk in _chunks(local.export_fragments()):
                added += hub.insert_rows(chunk)[0]
                carried += carry_cue_vectors(local, hub, chunk, hub.cue_vectors_due_among)
                done += len(chunk)
                if progress:
                    progress(done, total)
        linked = sum(hub.insert_rows([], chunk)[1] for chunk in _chunks(local.export_edges()))
        return Copied(added, linked,
                      carried + fill_after_write(hub, embedder, f"hub space {hub.space}"))
    finally:
        hub.close()


def plan_pull(settings: Settings, local: Store, space: str) -> Plan:
    hub = open_store(settings, space)
    try:
        ids = [row["id"] for row in hub.export_fragments()]
        return Plan(space, len(ids), local.count_fragments(),
                    _missing(ids, lambda part: local.get_many(part, with_text=False,
                                                              with_parent=False)),
                    hub.counts()["edges"])
    finally:
        hub.close()


def pull(settings: Settings, local: Store, space: str, progress: Progress | None = None
         ) -> Copied:
    hub = open_store(settings, space)
    try:
        before = local.counts()
        total = hub.count_fragments()
        done = carried = 0
        for chunk in _chunks(hub.export_fragments()):
            local.import_rows(chunk, [], [])
            carried += carry_cue_vectors(hub, local, chunk, lacking_locally(local))
            done += len(chunk)
            if progress:
                progress(done, total)
        for chunk in _chunks(hub.export_edges()):
            local.import_rows([], chunk, [])
        after = local.counts()
        return Copied(after["fragments"] - before["fragments"], after["edges"] - before["edges"],
                      carried)
    finally:
        hub.close()

