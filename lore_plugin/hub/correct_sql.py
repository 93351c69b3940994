"""Migration 4 of the hub's schema (issue 29): one member correcting another's fact.

A correction is a supersession: a new fact, written by the corrector, and the old one's
`superseded_by` pointing at it. Any writing member of a team space may do that to any fact of
the space, and any writing member may undo it (set `superseded_by` back to NULL); the
database records both, so no path (extraction, store_memory, the viewer, a member's own SQL)
can skip the record:

- `supersessions` holds one row per supersession in a team space: `author` is the corrector
  (stamped by migration 2's trigger, unforgeable), `original_author` the old fact's author
  (copied from the fragment by a trigger, whatever the client sends), and when it was undone,
  by whom (`undone_by`, stamped too). The original author's activity page reads it.
- An AFTER UPDATE trigger on `fragments` writes it: a new `superseded_by` adds a row, a
  cleared or changed one marks the standing row undone. It runs as the member (not SECURITY
  DEFINER), so the table's own policies hold.
- A row a client inserts by hand must describe a supersession that stands (the old fragment
  of the space is superseded by `new_id` now); a row a client updates can only be marked
  undone, once, and only when the supersession no longer stands. Only owners delete rows.
- Correcting, not rewriting: the text of a fact or detail (depth >= 2: knowledge, where
  topics and concepts above are structure that consolidation re-summarises) may be changed
  only by its author, an owner of the space or the admin. Anyone else gets an error that
  says to correct it instead. Every other column stays as migration 2 left it (recall's
  memory state, confirmation, supersession, embeddings are every member's to update)."""

from __future__ import annotations

from .access_sql import _READ, _WRITE, _protect

TABLE = "supersessions"
_OWN = "(space = ANY ((SELECT lore_spaces('own'))::text[]))"

MIGRATION = f"""
CREATE TABLE supersessions (
    space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    old_id text COLLATE "C" NOT NULL,
    new_id text COLLATE "C" NOT NULL,
    original_author name NOT NULL DEFAULT current_user,
    at double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    undone_by name,
    undone_at double precision
);
CREATE INDEX supersessions_standing ON supersessions (space, old_id) WHERE undone_at IS NULL;
CREATE INDEX supersessions_original_author ON supersessions (space, original_author, id);
{_protect(TABLE, _READ, _WRITE)}
DROP POLICY supersessions_remove ON supersessions;
CREATE POLICY supersessions_remove ON supersessions FOR DELETE USING {_OWN};

-- What a row says is the database's to say: who wrote the old fact, when, and that it stands.
CREATE FUNCTION lore_supersession_check() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    wrote name;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT f.author INTO wrote FROM public.fragments f
        WHERE f.space = NEW.space AND f.id = NEW.old_id AND f.superseded_by = NEW.new_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fragment % of space % is not superseded by %', NEW.old_id,
                NEW.space, NEW.new_id USING ERRCODE = 'check_violation';
        END IF;
        NEW.original_author := wrote;
        NEW.at := extract(epoch FROM clock_timestamp());
        NEW.undone_by := NULL; NEW.undone_at := NULL;
        RETURN NEW;
    END IF;
    -- An update only marks a row undone, once, when the supersession no longer stands.
    NEW.space := OLD.space; NEW.old_id := OLD.old_id; NEW.new_id := OLD.new_id;
    NEW.original_author := OLD.original_author; NEW.at := OLD.at;
    IF OLD.undone_at IS NOT NULL THEN
        NEW.undone_by := OLD.undone_by; NEW.undone_at := OLD.undone_at;
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM public.fragments f WHERE f.space = OLD.space AND f.id = OLD.old_id
               AND f.superseded_by = OLD.new_id) THEN
        RAISE EXCEPTION 'the supersession of % by % still stands: undo it on the fragment',
            OLD.old_id, OLD.new_id USING ERRCODE = 'check_violation';
    END IF;
    NEW.undone_by := current_user;
    NEW.undone_at := extract(epoch FROM clock_timestamp());
    RETURN NEW;
END $f$;
REVOKE ALL ON FUNCTION lore_supersession_check() FROM PUBLIC;
CREATE TRIGGER supersessions_check BEFORE INSERT OR UPDATE ON supersessions
    FOR EACH ROW EXECUTE FUNCTION lore_supersession_check();

-- Every change of superseded_by in a team space, by any path, is recorded.
CREATE FUNCTION lore_record_supersession() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.spaces s WHERE s.name = NEW.space AND s.kind = 'team')
    THEN
        RETURN NULL;
    END IF;
    IF OLD.superseded_by IS NOT NULL THEN
        UPDATE public.supersessions SET undone_at = 0
        WHERE space = OLD.space AND old_id = OLD.id AND new_id = OLD.superseded_by
          AND undone_at IS NULL;
    END IF;
    IF NEW.superseded_by IS NOT NULL THEN
        INSERT INTO public.supersessions (space, old_id, new_id)
        VALUES (NEW.space, NEW.id, NEW.superseded_by);
    END IF;
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION lore_record_supersession() FROM PUBLIC;
CREATE TRIGGER fragments_record_supersession AFTER UPDATE OF superseded_by ON fragments
    FOR EACH ROW WHEN (OLD.superseded_by IS DISTINCT FROM NEW.superseded_by)
    EXECUTE FUNCTION lore_record_supersession();

-- A teammate's fact is corrected, not rewritten.
CREATE FUNCTION lore_fact_text_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF OLD.depth >= 2
       AND (NEW.summary IS DISTINCT FROM OLD.summary OR NEW.content IS DISTINCT FROM OLD.content
            OR NEW.depth IS DISTINCT FROM OLD.depth)
       AND OLD.author <> current_user
       AND NOT OLD.space = ANY (public.lore_spaces('own'))
       AND NOT (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
                WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'only its author (%) or an owner of space % may change the text of '
            'fragment %; correct it instead (a new fact that supersedes it)',
            OLD.author, OLD.space, left(OLD.id, 8) USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $f$;
REVOKE ALL ON FUNCTION lore_fact_text_guard() FROM PUBLIC;
CREATE TRIGGER fragments_text_guard BEFORE UPDATE OF summary, content, depth ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_fact_text_guard();
"""
