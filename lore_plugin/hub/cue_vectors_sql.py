"""Migration 8 of the hub's schema (issue 30): the vectors of each note's cue phrases
(embedding/cue_vectors.py's blob), read only for a prompt's few candidates, never searched.

`cue_vectors` holds one row per fragment that has cues, keyed as fragments are (space, id),
`vectors` NULL while they are due. The database keeps the rows, as SQLite's triggers do
(store schema 11), so no writer can forget to: a fragment inserted with cues gets a due row
(per statement: a bulk push's batch at once); a change of its cues drops the row, vectors and
all, and adds a due one if it still has cues; its delete drops the row (the foreign key,
which also follows a deleted space). A change of cues is a delete and an insert, never an
update to NULL: a filler that read the old cues and writes after the change finds its row
gone (recall/cue_vector_fill.py's guard, cue_vectors.py), so stale vectors are never served.

Access is the space's, enforced by PostgreSQL like every table holding a space (migration 2):
row-level security forced; whoever may read the space reads its vectors; whoever may write
it (owner, member) fills them or clears a row (the blob changes nothing a member reads, only
the judge's ranking, as fragment_state's writes do). Nobody but the triggers adds a row:
they are SECURITY DEFINER (the admin's) with a fixed search_path, so the table needs no
`author`. A CHECK keeps every blob a whole number of phrases.

The migration adds the table empty and marks due every fragment that has cues: no column
is added to `fragments`, so it is not rewritten, and its lock (SHARE ROW EXCLUSIVE, taken by
the foreign key and the triggers) lets every reader through while it runs; writers wait for
its one INSERT .. SELECT (bench/README.md, "Cue vectors on the hub")."""

from __future__ import annotations

from ..core.types import EMBED_DIM
from .access_sql import _READ, _WRITE
from .words_sql import _function

TABLE = "cue_vectors"
ROW_BYTES = 4 + EMBED_DIM  # a phrase in the blob: its float32 scale and its int8 components

MIGRATION = f"""
CREATE TABLE {TABLE} (
    space text NOT NULL,
    fragment_id text COLLATE "C" NOT NULL,
    vectors bytea CHECK (octet_length(vectors) > 0
                         AND octet_length(vectors) % {ROW_BYTES} = 0),  -- NULL: due
    PRIMARY KEY (space, fragment_id),
    FOREIGN KEY (space, fragment_id) REFERENCES fragments(space, id) ON DELETE CASCADE
);
-- int8 components do not compress: never try.
ALTER TABLE {TABLE} ALTER COLUMN vectors SET STORAGE EXTERNAL;
CREATE INDEX {TABLE}_due ON {TABLE} (space, fragment_id) WHERE vectors IS NULL;
ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY;
CREATE POLICY {TABLE}_read ON {TABLE} FOR SELECT USING {_READ};
CREATE POLICY {TABLE}_fill ON {TABLE} FOR UPDATE USING {_WRITE} WITH CHECK {_WRITE};
CREATE POLICY {TABLE}_remove ON {TABLE} FOR DELETE USING {_WRITE};
GRANT SELECT, UPDATE (vectors), DELETE ON {TABLE} TO PUBLIC;

{_function("lore_cues_added", f'''    INSERT INTO public.{TABLE} (space, fragment_id)
        SELECT space, id FROM added WHERE cues <> '';''')}
CREATE TRIGGER fragments_cues_added AFTER INSERT ON fragments
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lore_cues_added();
{_function("lore_cues_changed", f'''    DELETE FROM public.{TABLE}
        WHERE space = NEW.space AND fragment_id = NEW.id;
    IF NEW.cues <> '' THEN
        INSERT INTO public.{TABLE} (space, fragment_id) VALUES (NEW.space, NEW.id);
    END IF;''')}
CREATE TRIGGER fragments_cues_changed AFTER UPDATE OF cues ON fragments
    FOR EACH ROW WHEN (OLD.cues IS DISTINCT FROM NEW.cues)
    EXECUTE FUNCTION lore_cues_changed();

INSERT INTO {TABLE} (space, fragment_id) SELECT space, id FROM fragments WHERE cues <> '';
"""
