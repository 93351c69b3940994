"""The hub's schema: numbered migrations, each applied with its version bump in one
transaction under an advisory lock, so two machines running `lore hub init` at once migrate
once and a failed migration leaves the previous version intact.

Every row carries its `space` (issue 29 adds row-level security per space on that column,
so no table may lack it, and every key starts with it). Fragment ids are unique within a
space: the same local fragment pushed to two spaces keeps its id in both."""

from __future__ import annotations

from .access_sql import MIGRATION as TEAM_ACCESS
from .correct_sql import MIGRATION as TEAM_CORRECT
from .cue_vectors_sql import MIGRATION as CUE_VECTORS
from .cues_sql import MIGRATION as CUES
from .forget_sql import MIGRATION as TEAM_FORGET
from .state_sql import MIGRATION as MEMORY_STATE
from .words_sql import MIGRATION as KEYWORD_TABLE

VERSION_TABLE = "lore_schema"
MIGRATE_LOCK = 0x4C4F5245_0001  # pg_advisory_xact_lock key: "LORE", schema migrations

MIGRATIONS: list[str] = [
    # 1: the model SQLite holds (store/schema.py), per space
    """
    CREATE TABLE spaces (
        name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
        created_at double precision NOT NULL,
        embed_model text,              -- the model every vector of the space comes from,
        embed_dim integer,             -- set by the first vector written (see vectors.py)
        vector_epoch bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE fragments (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        id text COLLATE "C" NOT NULL,  -- byte order: id-prefix lookups are ranges
        seq bigint GENERATED ALWAYS AS IDENTITY,  -- insertion order, as SQLite's rowid
        content text NOT NULL,
        summary text NOT NULL,
        depth integer NOT NULL CHECK (depth >= 0),
        embedding vector(384),
        created_at double precision NOT NULL,
        last_accessed double precision NOT NULL,
        access_count integer NOT NULL DEFAULT 0,
        source_session text,
        superseded_by text,
        metadata text NOT NULL DEFAULT '{}',
        importance double precision NOT NULL DEFAULT 0.5,
        relevance_score double precision NOT NULL DEFAULT 1.0,
        decay_rate double precision NOT NULL DEFAULT 0.03,
        last_reinforced double precision NOT NULL,
        project text,
        source text,
        basis text,
        confirmed_at double precision,
        -- Keyword search: the summary weighs as FTS5's bm25(2.0, 1.0) weighs it over content.
        -- (Dropped by migration 7: fragment_words' triggers compute the words, cues_sql.py.)
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english'::regconfig, summary), 'A') ||
            setweight(to_tsvector('english'::regconfig, content), 'B')) STORED,
        PRIMARY KEY (space, id)
    ) WITH (fillfactor = 90, toast_tuple_target = 8160);
    -- A row stays whole in its page when it fits (toast_tuple_target): at the default 2 KB
    -- the vector pushed the text and the tsvector out of line, and keyword search read them
    -- back through TOAST for every match. Vectors inline, not TOASTed: 1.5 KB of floats
    -- does not compress, and out of line every exact scan read them through the TOAST table
    -- (190 ms at 10K), which also made the planner prefer that scan over HNSW (14 ms).
    ALTER TABLE fragments ALTER COLUMN embedding SET STORAGE MAIN;
    -- No index covers the memory state (access_count, decay_rate, last_accessed,
    -- last_reinforced, relevance_score): recall rewrites it on every query, and an update
    -- that touches no indexed column is HOT, in place, instead of a new entry in every index
    -- (HNSW's among them: 100 ms per query at 10K before). fillfactor leaves the room for it.
    CREATE INDEX fragments_depth ON fragments (space, depth);
    CREATE INDEX fragments_superseded ON fragments (space, superseded_by);
    CREATE INDEX fragments_summary ON fragments (space, lower(summary), depth);
    CREATE INDEX fragments_session ON fragments (space, source_session, created_at);
    CREATE INDEX fragments_project ON fragments (space, project);
    CREATE INDEX fragments_unembedded ON fragments (space, id) WHERE embedding IS NULL;
    CREATE INDEX fragments_tsv ON fragments USING gin (tsv);
    CREATE INDEX fragments_embedding ON fragments USING hnsw (embedding vector_cosine_ops);
    CREATE TABLE edges (
        space text NOT NULL,
        id text NOT NULL,
        source text COLLATE "C" NOT NULL,
        target text COLLATE "C" NOT NULL,
        kind text NOT NULL CHECK (kind IN ('hierarchical','associative','temporal','supersedes')),
        weight double precision NOT NULL DEFAULT 1.0,
        created_at double precision NOT NULL,
        PRIMARY KEY (space, id),
        UNIQUE (space, source, target, kind),
        FOREIGN KEY (space, source) REFERENCES fragments(space, id) ON DELETE CASCADE,
        FOREIGN KEY (space, target) REFERENCES fragments(space, id) ON DELETE CASCADE
    );
    CREATE INDEX edges_target ON edges (space, target, kind);
    CREATE TABLE fragment_dates (
        space text NOT NULL,
        fragment_id text COLLATE "C" NOT NULL,
        first_day integer NOT NULL,
        last_day integer NOT NULL,
        PRIMARY KEY (space, fragment_id, first_day, last_day),
        FOREIGN KEY (space, fragment_id) REFERENCES fragments(space, id) ON DELETE CASCADE
    );
    CREATE INDEX fragment_dates_day ON fragment_dates (space, first_day, last_day);
    -- Bookkeeping is per machine too: two machines read different transcript files, and
    -- the same path on two machines is two files.
    CREATE TABLE watermarks (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        machine text NOT NULL,
        file_path text NOT NULL,
        byte_offset bigint NOT NULL DEFAULT 0,
        last_processed double precision NOT NULL,
        PRIMARY KEY (space, machine, file_path)
    );
    CREATE TABLE ingest_failures (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        machine text NOT NULL,
        file_path text NOT NULL,
        start_offset bigint NOT NULL,
        end_offset bigint NOT NULL,
        attempts integer NOT NULL DEFAULT 1,
        last_error text NOT NULL,
        first_failed double precision NOT NULL,
        next_retry double precision NOT NULL,
        parked integer NOT NULL DEFAULT 0,
        PRIMARY KEY (space, machine, file_path, start_offset)
    );
    CREATE TABLE history (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        machine text NOT NULL,
        file_path text NOT NULL,
        end_offset bigint NOT NULL,
        recorded_at double precision NOT NULL,
        PRIMARY KEY (space, machine, file_path)
    );
    CREATE TABLE meta (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (space, key)
    );
    CREATE TABLE llm_usage (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        machine text NOT NULL,
        at double precision NOT NULL,
        purpose text NOT NULL,
        project text,
        model text NOT NULL,
        input_tokens integer NOT NULL,
        output_tokens integer NOT NULL,
        cost_usd double precision
    );
    CREATE INDEX llm_usage_at ON llm_usage (space, at);
    CREATE TABLE curation_journal (
        space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at double precision NOT NULL,
        action text NOT NULL,
        fragment_id text NOT NULL,
        label text NOT NULL,
        undo text NOT NULL DEFAULT '{}',
        undone_at double precision
    );
    CREATE INDEX curation_journal_space ON curation_journal (space, id);
    """,
    # 2: team spaces enforced by the database: members, row-level security, provenance
    TEAM_ACCESS,
    # 3: forgetting a team fragment: its author or an owner only, journaled by the database
    TEAM_FORGET,
    # 4: one member correcting another's fact: recorded with both authors, undoable by any
    TEAM_CORRECT,
    # 5: the memory state recall and consolidation rewrite, in a narrow table of its own
    MEMORY_STATE,
    # 6: the keyword search's narrow table and each lexeme's document count, kept by triggers
    KEYWORD_TABLE,
    # 7: cues beside each fragment, searched as its words (the tsv column gives way to them)
    CUES,
    # 8: the vectors of each note's cue phrases, kept due by triggers until filled
    CUE_VECTORS,
]

SCHEMA_VERSION = len(MIGRATIONS)
