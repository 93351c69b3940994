"""A hub migration (issue 28): the keyword search's own narrow table.

Keyword search and its term counts read, for every fragment holding a query term, that
fragment's tsvector. In `fragments` that is a heap row of about 2.3 KB (the 1.5 KB vector
is inline, so that vector scans need no TOAST), three to a page: at 100K fragments a
4-word query visited 20-45K pages, most from outside shared_buffers. `fragment_words` holds
the space, the id and the tsvector only (about 300 bytes a row, 37 MB at 110K rows against
286 MB), with the GIN index, which moves here from `fragments`.

The database keeps it: an AFTER trigger on `fragments` inserts the row and rewrites it when
the summary or content changes (the tsvector is a generated column, computed before AFTER
triggers run), and the foreign key deletes it with its fragment. So every write path (one
insert, a bulk push, a correction, forgetting) keeps it in the same transaction, and a
crash leaves both tables or neither.

Only the database writes it. Under row-level security (forced, as on every table holding a
space) a member reads the words of the spaces they may read, and may write none: a writing
member could otherwise delete or rewrite the words of another's fragment and hide it from
keyword search, where `fragments` lets only its author or an owner delete it (migration 3).
The trigger is SECURITY DEFINER (the admin's, who runs the migration and passes row-level
security) with a fixed search_path, and it writes exactly the fragment's own row. So the
table needs no `author`: every row's is the fragment's, one join away."""

from __future__ import annotations

from .access_sql import _READ

TABLE = "fragment_words"

MIGRATION = f"""
CREATE TABLE {TABLE} (
    space text NOT NULL,
    id text COLLATE "C" NOT NULL,
    tsv tsvector NOT NULL,
    PRIMARY KEY (space, id),
    FOREIGN KEY (space, id) REFERENCES fragments(space, id) ON DELETE CASCADE
);
ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY;
CREATE POLICY {TABLE}_read ON {TABLE} FOR SELECT USING {_READ};
GRANT SELECT ON {TABLE} TO PUBLIC;
INSERT INTO {TABLE} (space, id, tsv) SELECT space, id, tsv FROM fragments;
CREATE INDEX {TABLE}_tsv ON {TABLE} USING gin (tsv);
DROP INDEX fragments_tsv;  -- nothing searches fragments.tsv any more

CREATE FUNCTION lore_fragment_words() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO public.{TABLE} (space, id, tsv) VALUES (NEW.space, NEW.id, NEW.tsv);
    ELSIF NEW.tsv IS DISTINCT FROM OLD.tsv THEN
        UPDATE public.{TABLE} SET tsv = NEW.tsv WHERE space = NEW.space AND id = NEW.id;
    END IF;
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION lore_fragment_words() FROM PUBLIC;
CREATE TRIGGER fragments_words AFTER INSERT OR UPDATE OF summary, content ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_fragment_words();
ANALYZE {TABLE};
"""
