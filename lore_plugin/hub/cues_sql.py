"""Migration 7 of the hub's schema (issue 30): cues, the phrases a note may be asked for by
(core/cues.py), kept beside each fragment and searched as its words, never shown.

`fragments` gets `cues` (phrases one a line, '' for none). The keyword index holds them at
the content's weight (B), as the local FTS5 index weighs its cues column like content: one
definition of a fragment's words, `lore_words(summary, content, cues)`, which the triggers
of migration 6 (words_sql.py) now compute into `fragment_words` on insert and on a change of
any of the three.

The generated column `fragments.tsv` goes. Nothing read it since migration 6 but those
triggers, and giving it cues would have rewritten the whole table (a changed generation
expression, or a dropped and re-added stored column, rewrites every row and rebuilds every
index, the HNSW index among them, under a lock that stops every member of every space) and
needs PostgreSQL 17 for the in-place form, where Lore supports 13. Adding a column with a
constant default and dropping one change the catalog only. Its bytes leave each row as
the row is next rewritten, and new rows are written without it (only `fragment_words`
holds a fragment's tsvector now). Measured: 0.89 s at 10K fragments, 6 s at 100K, against
5.4 s and 6 minutes for the rewrite (bench/README.md, "Cues on the hub").

Existing rows have no cues, so their words are unchanged; the migration still recomputes
every fragment's words and rewrites those that differ (none, unless a hand changed them),
through `fragment_words`' own trigger so that the lexeme counts follow."""

from __future__ import annotations

from .words_sql import TABLE, _function

# Schema-qualified throughout: the triggers call it with search_path pg_catalog, pg_temp,
# and a plain SQL function without a SET clause can be inlined into their statements.
WORDS = """
CREATE FUNCTION lore_words(summary text, content text, cues text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english', summary), 'A')
        OPERATOR(pg_catalog.||)
        pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english', content), 'B')
        OPERATOR(pg_catalog.||)
        pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english', cues), 'B')
$f$;
"""

MIGRATION = f"""
ALTER TABLE fragments ADD COLUMN cues text NOT NULL DEFAULT '';
{WORDS}
DROP TRIGGER fragments_words_added ON fragments;
DROP FUNCTION lore_words_added();
{_function("lore_words_added", f'''    INSERT INTO public.{TABLE} (space, id, tsv)
        SELECT space, id, public.lore_words(summary, content, cues) FROM added;''')}
CREATE TRIGGER fragments_words_added AFTER INSERT ON fragments
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lore_words_added();
DROP TRIGGER fragments_words_changed ON fragments;
DROP FUNCTION lore_words_changed();
{_function("lore_words_changed", f'''    UPDATE public.{TABLE} w SET tsv = n.tsv
        FROM (SELECT public.lore_words(NEW.summary, NEW.content, NEW.cues) AS tsv) n
        WHERE w.space = NEW.space AND w.id = NEW.id AND w.tsv IS DISTINCT FROM n.tsv;''')}
CREATE TRIGGER fragments_words_changed AFTER UPDATE OF summary, content, cues ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_words_changed();
ALTER TABLE fragments DROP COLUMN tsv;
UPDATE {TABLE} w SET tsv = lore_words(f.summary, f.content, f.cues) FROM fragments f
    WHERE f.space = w.space AND f.id = w.id
    AND w.tsv IS DISTINCT FROM lore_words(f.summary, f.content, f.cues);
"""
