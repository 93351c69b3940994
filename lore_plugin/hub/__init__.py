"""The PostgreSQL + pgvector backend: the only package that imports psycopg, psycopg_pool
and pgserver. `HubStore` offers the store seam's methods (store.Store's names and meaning)
over one space of a hub, for ingestion, storing, recall and the watermark path:

    errors       the named refusals (unreachable, no pgvector, newer schema, unknown space,
                 another embedding model, a dropped connection)
    schema       the numbered migrations; every row holds its space
    bootstrap    reach the server, pgvector, create or migrate, find or create the space
    connection   the pool, write()/read() transactions, retries of idempotent writes
    tree         edges and the topic tree
    vectors      pgvector columns, HNSW search, the space's embedding model
    dates        the days a fragment's text names
    fragments    insert (redacted, cues too), get, resolve, update, supersede, delete
    term_counts  how many fragments hold each query term (idf), kept a minute
    words_sql    the keyword search's narrow table and each lexeme's count, kept by triggers
    cues_sql     cues beside each fragment (migration 7), searched as its words: lore_words
    cue_vectors_sql  the vectors of each note's cues (migration 8): due rows kept by triggers
    cue_vectors  those vectors read for a prompt's candidates, listed due, filled (guarded)
    rows         a whole fragment as the hub reads it (with its cues); cues as it keeps them
    keywords     tsvector search on FTS5's scale over the rarest terms' matches
    state        the memory state in its narrow table (migration 5): the join readers use,
                 writes, usefulness
    bookkeeping  watermarks and failed batches per machine, meta, history
    ledger       the LLM token ledger, the curation journal, the advisory lock
    corrections  a team space's record of supersessions (both authors), and their undo
    upkeep       what the consolidation cycle reads and writes, the space's schedule
    forgetting   forgetting under the author/owner rule of forget_sql
    transfer     bulk insert keeping ids (COPY through a staging table), export
    vector_index a large load builds the HNSW index after its rows; repair if cut off
    dev          a throwaway local server (`lore hub dev`, the tests)"""

from __future__ import annotations

from .bookkeeping import Bookkeeping
from .connection import DEFAULT_MODEL
from .corrections import Corrections
from .cue_vectors import CueVectors
from .errors import (
    HubError,
    HubSchemaTooNew,
    HubUnavailable,
    HubUnreachable,
    ModelMismatch,
    NoPgvector,
    UnknownSpace,
)
from .forgetting import Forgetting
from .keywords import Keywords
from .ledger import Ledger
from .team_reads import TeamReads
from .transfer import Transfer
from .upkeep import Upkeep

__all__ = ["DEFAULT_MODEL", "HubError", "HubSchemaTooNew", "HubStore", "HubUnavailable",
           "HubUnreachable", "ModelMismatch", "NoPgvector", "UnknownSpace", "init_hub",
           "read_only_url"]


class HubStore(Transfer, Keywords, Bookkeeping, Ledger, TeamReads, Corrections, Upkeep,
               Forgetting, CueVectors):
    # TeamReads, Corrections: issue 29; Upkeep, Forgetting: consolidation of hub spaces (28);
    # CueVectors: the vectors of cue phrases (30)
    """One space of a hub, through a small connection pool (see the modules)."""


def read_only_url(url: str) -> str:
    """The URL with every transaction read-only, enforced by the server (previews)."""
    from . import bootstrap

    return bootstrap.read_only(url)


def init_hub(url: str, spaces: tuple[str, ...] = ("personal",)) -> int:
    """`lore hub init`: creates or migrates the schema and the spaces; returns how many
    migrations ran (0 the second time: running it again changes nothing)."""
    from . import bootstrap

    with bootstrap.connect(url) as conn:
        ran = bootstrap.migrate(conn, url)
        for space in spaces:
            bootstrap.ensure_space(conn, space, True, url)
    from . import vector_index

    vector_index.ensure(url)  # a bulk push cut off between dropping and building it
    return ran
