"""The numbered schema migrations. Each runs in one transaction with its version bump,
so a failed migration leaves the database at the previous version, intact."""

from __future__ import annotations

# A fragment's cue vectors are due (a row, vectors NULL) whenever its cues are written or
# changed, and gone with its cues or itself: schema 11 and 12 create these, no writer can forget.
CUE_TRIGGERS = """
    CREATE TRIGGER fragments_cues_insert AFTER INSERT ON fragments WHEN new.cues != '' BEGIN
        INSERT OR REPLACE INTO cue_vectors (fragment_id, vectors) VALUES (new.id, NULL);
    END;
    CREATE TRIGGER fragments_cues_update AFTER UPDATE OF cues ON fragments
    WHEN old.cues IS NOT new.cues BEGIN
        DELETE FROM cue_vectors WHERE fragment_id = old.id;
        INSERT INTO cue_vectors (fragment_id, vectors) SELECT new.id, NULL WHERE new.cues != '';
    END;
    CREATE TRIGGER fragments_cues_delete AFTER DELETE ON fragments BEGIN
        DELETE FROM cue_vectors WHERE fragment_id = old.id;
    END;
"""

# Version 1 is the seed schema, exactly; later versions are this design's additions.
MIGRATIONS: list[str] = [
    # 1: the seed
    """
    CREATE TABLE fragments (
        id TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        summary TEXT NOT NULL,
        depth INTEGER NOT NULL CHECK (depth >= 0),
        embedding BLOB,
        created_at REAL NOT NULL,
        last_accessed REAL NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        source_session TEXT,
        superseded_by TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        importance REAL NOT NULL DEFAULT 0.5,
        relevance_score REAL NOT NULL DEFAULT 1.0,
        decay_rate REAL NOT NULL DEFAULT 0.03,
        last_reinforced REAL NOT NULL
    );
    CREATE TABLE edges (
        id TEXT PRIMARY KEY,
        source TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
        target TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('hierarchical','associative','temporal','supersedes')),
        weight REAL NOT NULL DEFAULT 1.0,
        created_at REAL NOT NULL
    );
    CREATE TABLE watermarks (
        file_path TEXT PRIMARY KEY,
        byte_offset INTEGER NOT NULL DEFAULT 0,
        last_processed REAL NOT NULL
    );
    CREATE INDEX idx_fragments_depth ON fragments(depth);
    CREATE INDEX idx_fragments_relevance ON fragments(relevance_score);
    CREATE INDEX idx_edges_source ON edges(source, kind);
    CREATE INDEX idx_edges_target ON edges(target, kind);
    """,
    # 2: keyword search, projects, failure records, meta
    """
    ALTER TABLE fragments ADD COLUMN project TEXT;
    CREATE INDEX idx_fragments_project ON fragments(project);
    CREATE INDEX idx_fragments_superseded ON fragments(superseded_by);
    CREATE UNIQUE INDEX idx_edges_unique ON edges(source, target, kind);
    CREATE VIRTUAL TABLE fragments_fts USING fts5(
        summary, content, content='fragments', content_rowid='rowid',
        tokenize='porter unicode61'
    );
    CREATE TRIGGER fragments_fts_insert AFTER INSERT ON fragments BEGIN
        INSERT INTO fragments_fts(rowid, summary, content)
        VALUES (new.rowid, new.summary, new.content);
    END;
    CREATE TRIGGER fragments_fts_delete AFTER DELETE ON fragments BEGIN
        INSERT INTO fragments_fts(fragments_fts, rowid, summary, content)
        VALUES ('delete', old.rowid, old.summary, old.content);
    END;
    CREATE TRIGGER fragments_fts_update AFTER UPDATE OF summary, content ON fragments BEGIN
        INSERT INTO fragments_fts(fragments_fts, rowid, summary, content)
        VALUES ('delete', old.rowid, old.summary, old.content);
        INSERT INTO fragments_fts(rowid, summary, content)
        VALUES (new.rowid, new.summary, new.content);
    END;
    INSERT INTO fragments_fts(fragments_fts) VALUES ('rebuild');
    CREATE TABLE ingest_failures (
        file_path TEXT NOT NULL,
        start_offset INTEGER NOT NULL,
        end_offset INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        last_error TEXT NOT NULL,
        first_failed REAL NOT NULL,
        next_retry REAL NOT NULL,
        parked INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (file_path, start_offset)
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE consolidation_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at REAL NOT NULL,
        finished_at REAL,
        dry_run INTEGER NOT NULL DEFAULT 0,
        report TEXT NOT NULL DEFAULT '{}'
    );
    """,
    # 3: lookups that ran as full scans: fragments still needing a vector (every server start)
    # and topic / concept matching by name (every ingested batch)
    """
    CREATE INDEX idx_fragments_unembedded ON fragments(id) WHERE embedding IS NULL;
    CREATE INDEX idx_fragments_summary ON fragments(lower(summary), depth);
    """,
    # 4: provenance: where each fragment came from (types.SOURCES), what extraction based it on
    # (types.BASES), and when the user confirmed it; NULL for knowledge kept before
    """
    ALTER TABLE fragments ADD COLUMN source TEXT;
    ALTER TABLE fragments ADD COLUMN basis TEXT;
    ALTER TABLE fragments ADD COLUMN confirmed_at REAL;
    """,
    # 5 (issue 15): the transcripts that predate Lore's first run (only `lore
    # ingest` reads them), and one row per LLM call for token accounting and the daily budget
    """
    CREATE TABLE history (
        file_path TEXT PRIMARY KEY,
        end_offset INTEGER NOT NULL,
        recorded_at REAL NOT NULL
    );
    CREATE TABLE llm_usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        purpose TEXT NOT NULL,
        project TEXT,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost_usd REAL
    );
    CREATE INDEX idx_llm_usage_at ON llm_usage(at);
    """,
    # 6: the days and periods a fragment's own text names (timeparse.written_dates), as day
    # numbers (date.toordinal), so that time-aware recall finds knowledge stored long after
    # the fact. Filled at insert; fragments stored before this version are dated by
    # Store.date_written_backlog.
    """
    CREATE TABLE fragment_dates (
        fragment_id TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
        first_day INTEGER NOT NULL,
        last_day INTEGER NOT NULL,
        PRIMARY KEY (fragment_id, first_day, last_day)
    ) WITHOUT ROWID;
    CREATE INDEX idx_fragment_dates_day ON fragment_dates(first_day, last_day);
    INSERT OR REPLACE INTO meta (key, value)
        SELECT 'written_dates_backlog', COALESCE(MAX(rowid), 0) FROM fragments;
    """,
    # 7 (issue 17): failures extraction met, per session and project, and the
    # recurring patterns consolidation finds among them (the rule of three); and per fragment,
    # how often recall returned it and how often the assistant then used it (recall_use)
    """
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT,
        project TEXT,
        kind TEXT NOT NULL,
        kind_key TEXT NOT NULL,
        what TEXT NOT NULL,
        fix TEXT,
        embedding BLOB,
        created_at REAL NOT NULL
    );
    CREATE INDEX idx_failures_kind ON failures(kind_key);
    CREATE TABLE failure_patterns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        what TEXT NOT NULL,
        fix TEXT,
        sessions INTEGER NOT NULL,
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL
    );
    CREATE TABLE failure_pattern_projects (
        pattern_id INTEGER NOT NULL REFERENCES failure_patterns(id) ON DELETE CASCADE,
        project TEXT NOT NULL,
        PRIMARY KEY (pattern_id, project)
    );
    CREATE INDEX idx_failure_pattern_projects ON failure_pattern_projects(project);
    CREATE TABLE recall_use (
        fragment_id TEXT PRIMARY KEY REFERENCES fragments(id) ON DELETE CASCADE,
        returned INTEGER NOT NULL DEFAULT 0,
        used INTEGER NOT NULL DEFAULT 0,
        ignored_streak INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    );
    """,
    # 8: the viewer's curation journal (what each edit, correction, move, merge or confirmation
    # needs to be undone; `undo` is '{}' once it cannot be), and sessions looked up by id
    """
    CREATE TABLE curation_journal (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        action TEXT NOT NULL,
        fragment_id TEXT NOT NULL,
        label TEXT NOT NULL,
        undo TEXT NOT NULL DEFAULT '{}',
        undone_at REAL
    );
    CREATE INDEX idx_fragments_session ON fragments(source_session, created_at);
    """,
    # 9 (issue 27): the id store_memory reserved for a request that turned out to repeat an
    # existing fragment, and that fragment: the reserved id was already given to the caller
    # (store/journal.py), so it keeps resolving (Store.resolve_id)
    """
    CREATE TABLE fragment_redirects (
        id TEXT PRIMARY KEY,
        target TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX idx_fragment_redirects_target ON fragment_redirects(target);
    """,
    # 10 (issue 30): cues, the phrases a fragment may be asked for by (core/cues.py), one a
    # line: searched as its words (a third column of the keyword index, weighted as its
    # content), never shown. The index is made anew with the column, and filled again.
    """
    ALTER TABLE fragments ADD COLUMN cues TEXT NOT NULL DEFAULT '';
    DROP TRIGGER fragments_fts_insert;
    DROP TRIGGER fragments_fts_delete;
    DROP TRIGGER fragments_fts_update;
    DROP TABLE fragments_fts;
    CREATE VIRTUAL TABLE fragments_fts USING fts5(
        summary, content, cues, content='fragments', content_rowid='rowid',
        tokenize='porter unicode61'
    );
    CREATE TRIGGER fragments_fts_insert AFTER INSERT ON fragments BEGIN
        INSERT INTO fragments_fts(rowid, summary, content, cues)
        VALUES (new.rowid, new.summary, new.content, new.cues);
    END;
    CREATE TRIGGER fragments_fts_delete AFTER DELETE ON fragments BEGIN
        INSERT INTO fragments_fts(fragments_fts, rowid, summary, content, cues)
        VALUES ('delete', old.rowid, old.summary, old.content, old.cues);
    END;
    CREATE TRIGGER fragments_fts_update AFTER UPDATE OF summary, content, cues ON fragments
    BEGIN
        INSERT INTO fragments_fts(fragments_fts, rowid, summary, content, cues)
        VALUES ('delete', old.rowid, old.summary, old.content, old.cues);
        INSERT INTO fragments_fts(rowid, summary, content, cues)
        VALUES (new.rowid, new.summary, new.content, new.cues);
    END;
    INSERT INTO fragments_fts(fragments_fts) VALUES ('rebuild');
    """,
    # 11 (issue 30): the vectors of each fragment's cues (embedding/cue_vectors.py), read for
    # a prompt's few candidates only. A row with vectors NULL is due: the triggers make one
    # whenever cues are written or changed, so no writer can forget, and the partial index
    # finds due rows without reading the table. Rows exist only for fragments with cues;
    # superseded ones are filled too (harmless, and nothing stays due for ever).
    """
    CREATE TABLE cue_vectors (
        fragment_id TEXT PRIMARY KEY,
        vectors BLOB
    ) WITHOUT ROWID;
    CREATE INDEX idx_cue_vectors_due ON cue_vectors(fragment_id) WHERE vectors IS NULL;
    """ + CUE_TRIGGERS + """
    INSERT INTO cue_vectors (fragment_id, vectors) SELECT id, NULL FROM fragments WHERE cues != '';
    """,
    # 12 (issue 30): cue_vectors as a rowid table. In 11's WITHOUT ROWID table a blob of
    # 0.8-2 KB overflows the index b-tree's page, which made the table twice the size (356
    # vs 180 MB for 96K notes) and a prompt's read of 20 blobs 2.7x slower (bench/README.md,
    # "Cue vectors in the local store"). The rows are kept; the triggers are the same.
    """
    DROP TRIGGER fragments_cues_insert;
    DROP TRIGGER fragments_cues_update;
    DROP TRIGGER fragments_cues_delete;
    ALTER TABLE cue_vectors RENAME TO cue_vectors_11;
    CREATE TABLE cue_vectors (
        fragment_id TEXT PRIMARY KEY,
        vectors BLOB
    );
    INSERT INTO cue_vectors (fragment_id, vectors)
        SELECT fragment_id, vectors FROM cue_vectors_11 ORDER BY fragment_id;
    DROP TABLE cue_vectors_11;
    CREATE INDEX idx_cue_vectors_due ON cue_vectors(fragment_id) WHERE vectors IS NULL;
    """ + CUE_TRIGGERS,
]

SCHEMA_VERSION = len(MIGRATIONS)
