"""A hub migration (issue 28): the keyword search's own narrow table, and each lexeme's
document count.

Keyword search and its term counts read, for every fragment holding a query term, that
fragment's tsvector. In `fragments` that is a heap row of about 2.3 KB (the 1.5 KB vector
is inline, so that vector scans need no TOAST), three to a page: at 100K fragments a
4-word query visited 20-45K pages, most from outside shared_buffers. `fragment_words` holds
the space, the id and the tsvector only (about 300 bytes a row, 37 MB at 110K rows against
286 MB), with the GIN index, which moves here from `fragments`.

`lexeme_counts` says how many fragments of a space hold each lexeme (idf's document count)
without visiting them: it is a list of signed changes, one row per lexeme a statement
added or removed, whose sum is the count. Writers only append, so two writers never wait
for each other or deadlock on a hot word, as they would on one counter row per lexeme
held until commit; a reader sums a lexeme's rows through the index. A bulk push adds one
row per lexeme and batch, one insert one per lexeme of the fragment; a reader that meets a
lexeme of many rows folds them into their sum (`lore_fold_lexemes`, one statement: rows
written meanwhile are not in its snapshot and stay, so the sum is kept). A space's rows stay
when the space is deleted; they sum to zero.

The database keeps both: triggers on `fragments` copy the tsvector of inserted rows (per
statement: a bulk push's batch at once) and rewrite it when the summary or content changes
(the tsvector is a generated column, computed before AFTER triggers run); the foreign key
deletes the words with their fragment; and triggers on `fragment_words` append the changes
of its lexemes. So every write path (one insert, a bulk push, a correction, forgetting)
keeps them in the same transaction, and a crash leaves all three tables or none changed.

Only the database writes them. Under row-level security (forced, as on every table holding
a space) a member reads the words and counts of the spaces they may read, and may write
none: a writing member could otherwise delete or rewrite the words of another's fragment
and hide it from keyword search, where `fragments` lets only its author or an owner delete
it (migration 3). The triggers are SECURITY DEFINER (the admin's, who runs the migration
and passes row-level security) with a fixed search_path, and write exactly what the
fragment's own change implies. So the tables need no `author`."""

from __future__ import annotations

from .access_sql import _READ

TABLE = "fragment_words"
COUNTS = "lexeme_counts"


def _read_only(table: str) -> str:
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY {table}_read ON {table} FOR SELECT USING {_READ};
GRANT SELECT ON {table} TO PUBLIC;
"""


def _function(name: str, body: str) -> str:
    return f"""
CREATE FUNCTION {name}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
{body}
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION {name}() FROM PUBLIC;
"""


# One row per (space, lexeme) of a set of tsvectors, with how many of them hold it.
def _lexemes(rows: str, sign: str) -> str:
    return (f"SELECT r.space, x.lexeme, {sign}count(*)::integer AS change FROM {rows} r, "
            "unnest(tsvector_to_array(r.tsv)) AS x(lexeme) GROUP BY r.space, x.lexeme")


MIGRATION = f"""
CREATE TABLE {TABLE} (
    space text NOT NULL,
    id text COLLATE "C" NOT NULL,
    tsv tsvector NOT NULL,
    PRIMARY KEY (space, id),
    FOREIGN KEY (space, id) REFERENCES fragments(space, id) ON DELETE CASCADE
);
{_read_only(TABLE)}
INSERT INTO {TABLE} (space, id, tsv) SELECT space, id, tsv FROM fragments;
CREATE INDEX {TABLE}_tsv ON {TABLE} USING gin (tsv);
DROP INDEX fragments_tsv;  -- nothing searches fragments.tsv any more

CREATE TABLE {COUNTS} (
    space text NOT NULL,
    lexeme text NOT NULL,
    change integer NOT NULL
);
{_read_only(COUNTS)}
INSERT INTO {COUNTS} (space, lexeme, change) {_lexemes(TABLE, "")};
CREATE INDEX {COUNTS}_lexeme ON {COUNTS} (space, lexeme) INCLUDE (change);
{_function("lore_words_added", f'''    INSERT INTO public.{TABLE} (space, id, tsv)
        SELECT space, id, tsv FROM added;''')}
CREATE TRIGGER fragments_words_added AFTER INSERT ON fragments
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lore_words_added();
{_function("lore_words_changed", f'''    IF NEW.tsv IS DISTINCT FROM OLD.tsv THEN
        UPDATE public.{TABLE} SET tsv = NEW.tsv WHERE space = NEW.space AND id = NEW.id;
    END IF;''')}
CREATE TRIGGER fragments_words_changed AFTER UPDATE OF summary, content ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_words_changed();
{_function("lore_lexemes_added", f'''    INSERT INTO public.{COUNTS} (space, lexeme, change)
        {_lexemes("added", "")};''')}
CREATE TRIGGER {TABLE}_added AFTER INSERT ON {TABLE}
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lore_lexemes_added();
{_function("lore_lexemes_removed", f'''    INSERT INTO public.{COUNTS} (space, lexeme, change)
        {_lexemes("removed", "-")};''')}
CREATE TRIGGER {TABLE}_removed AFTER DELETE ON {TABLE}
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION lore_lexemes_removed();
{_function("lore_lexemes_changed", f'''    INSERT INTO public.{COUNTS} (space, lexeme, change)
        SELECT space, lexeme, sum(change)::integer FROM ({_lexemes("added", "")} UNION ALL
        {_lexemes("removed", "-")}) AS c GROUP BY space, lexeme HAVING sum(change) <> 0;''')}
CREATE TRIGGER {TABLE}_changed AFTER UPDATE ON {TABLE}
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION lore_lexemes_changed();
-- Folds a lexeme's rows into one, for a caller who may read the space (the caller is the
-- session's role: inside this function current_user is the admin).
CREATE FUNCTION lore_fold_lexemes(target text, lexemes text[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
    WITH gone AS (DELETE FROM public.{COUNTS} c WHERE c.space = target
                  AND c.lexeme = ANY (lexemes)
                  AND target = ANY (public.lore_spaces('read', session_user))
                  RETURNING c.lexeme, c.change)
    INSERT INTO public.{COUNTS} (space, lexeme, change)
    SELECT target, lexeme, sum(change)::integer FROM gone GROUP BY lexeme
    HAVING sum(change) <> 0;
$f$;
REVOKE ALL ON FUNCTION lore_fold_lexemes(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lore_fold_lexemes(text, text[]) TO PUBLIC;
ANALYZE {TABLE};
ANALYZE {COUNTS};
"""
