"""Migration 3 of the hub's schema (issue 29): forgetting a team fragment is allowed only to
its author and to the space's owners, and every such deletion is journaled by the database.

- The DELETE policy of `fragments` now asks, beyond write access, that the row be the
  member's own (`author`, stamped by migration 2, which no client can forge) or that the
  member own the space. A refused delete is filtered like any row-level security, so
  HubStore.delete checks the row count and rolls back (fragments.py). The admin (superuser)
  passes row-level security and is unaffected.
- Edges keep migration 2's rule (any writing member): an edge is structure, not knowledge,
  and `link` moves a child by deleting its old parent edge, whoever drew it; a filtered
  delete there would leave the child with two parents. Edges of a deleted fragment go by
  ON DELETE CASCADE, which row-level security does not filter.
- Supersession (an UPDATE of `superseded_by`) stays open to every writing member: issue 29
  makes it the way one member corrects another's fact, undoable by any member.
- An AFTER DELETE trigger writes a `delete` row to the space's curation journal for every
  fragment deleted from a team space: its `author` column is the deleter (current_user,
  stamped by migration 2's trigger), the label names the fragment's own author. A client
  cannot skip it (disabling a trigger takes the table's owner or a superuser), cannot
  rewrite it (the journal keeps what happened on update; only the undo state changes) and
  cannot delete it unless it owns the space."""

from __future__ import annotations

_OWN_OR_AUTHOR = ("(space = ANY ((SELECT lore_spaces('write'))::text[]) AND "
                  "(author = current_user OR space = ANY ((SELECT lore_spaces('own'))::text[])))")
_OWN = "(space = ANY ((SELECT lore_spaces('own'))::text[]))"

MIGRATION = f"""
DROP POLICY fragments_remove ON fragments;
CREATE POLICY fragments_remove ON fragments FOR DELETE USING {_OWN_OR_AUTHOR};

-- Not SECURITY DEFINER: the journal row is inserted as the deleter, so its author is theirs
-- and the journal's own policies hold (a deleter always has write access to the space).
CREATE FUNCTION lore_journal_delete() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    -- Team spaces only; and nothing when the space itself is going (its journal goes too).
    IF EXISTS (SELECT 1 FROM public.spaces s WHERE s.name = OLD.space AND s.kind = 'team') THEN
        INSERT INTO public.curation_journal (space, at, action, fragment_id, label)
        VALUES (OLD.space, extract(epoch FROM clock_timestamp()), 'delete', OLD.id,
                'deleted “' || left(OLD.summary, 60) || '” by ' || current_user
                || ' (author: ' || OLD.author || ')');
    END IF;
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION lore_journal_delete() FROM PUBLIC;
CREATE TRIGGER fragments_journal_delete AFTER DELETE ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_journal_delete();

-- What the journal says happened stays: an update may only mark an entry undone.
CREATE FUNCTION lore_journal_keep() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    NEW.space := OLD.space; NEW.at := OLD.at; NEW.action := OLD.action;
    NEW.fragment_id := OLD.fragment_id; NEW.label := OLD.label;
    RETURN NEW;
END $f$;
REVOKE ALL ON FUNCTION lore_journal_keep() FROM PUBLIC;
CREATE TRIGGER curation_journal_keep BEFORE UPDATE ON curation_journal
    FOR EACH ROW EXECUTE FUNCTION lore_journal_keep();
DROP POLICY curation_journal_remove ON curation_journal;
CREATE POLICY curation_journal_remove ON curation_journal FOR DELETE USING {_OWN};
"""
