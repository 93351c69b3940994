"""Migration 2 of the hub's schema (issue 29): team spaces enforced by PostgreSQL itself.

Who is who:
- The **admin** is the role that runs this migration (`lore hub init` the first time): a
  superuser, or a role with BYPASSRLS. It owns every table, the two helper functions and the
  triggers; a superuser passes row-level security by nature, so the admin is trusted.
- A **member** connects as their own role. Tables are never owned by a member, and every
  table holding a space has ENABLE and FORCE ROW LEVEL SECURITY, so even a non-superuser
  owner is held by the policies. A member reaches a space only through a row of
  `space_members` (owner / member / reader) naming their role.
- The **creator** of a space is its owner for good (a trigger refuses to demote or remove
  them). `personal` and `personal.<role>` spaces are owner-only: nobody can be added to one.

Every policy asks `lore_spaces(need)` for the spaces the current role may read, write or
own. It is SECURITY DEFINER because the membership table's own policies need it (a policy on
space_members that read space_members would recurse), with a fixed search_path and its table
named by schema; it answers for the calling role only (the role must be the session's or one
the session may act as). Policies call it once per statement, as an InitPlan
`(SELECT lore_spaces(..))`, so membership is read fresh by every statement: removing a member
takes effect at the next statement on every pooled connection, and a per-row call never slows
a vector search.

Provenance: every row records its `author` (current_user, set by a trigger on insert and kept
on update, so a client cannot forge it); fragments also record the machine label the client
sets (`lore.machine`) and `authored_at`, the server's clock at the insert. The bookkeeping of
a machine (watermarks, failed batches, history) is its author's alone."""

from __future__ import annotations

SHARED = ("fragments", "edges", "fragment_dates", "meta", "llm_usage", "curation_journal")
OWN_ROWS = ("watermarks", "ingest_failures", "history")
LEVELS = ("owner", "member", "reader")

_PREAMBLE = """
DO $$ BEGIN
    IF NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'the role running lore hub init for team spaces must be a superuser '
            'or have BYPASSRLS: it becomes the hub''s admin; members connect as their own roles';
    END IF;
END $$;
-- Members may not create objects beside the hub's tables (a view or function of theirs
-- runs with their own rights anyway; this keeps the schema the admin's).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

ALTER TABLE spaces
    ADD COLUMN owner name NOT NULL DEFAULT current_user,
    ADD COLUMN kind text NOT NULL DEFAULT 'team' CHECK (kind IN ('team', 'personal'));
UPDATE spaces SET kind = 'personal' WHERE name = 'personal' OR name LIKE 'personal.%';

CREATE TABLE space_members (
    space text NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
    role regrole NOT NULL,          -- the role's oid: a dropped and re-created role is a stranger
    level text NOT NULL CHECK (level IN ('owner', 'member', 'reader')),
    added_by name NOT NULL DEFAULT current_user,
    added_at double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    PRIMARY KEY (space, role)
);
INSERT INTO space_members (space, role, level)
    SELECT s.name, r.oid::regrole, 'owner' FROM spaces s JOIN pg_roles r ON r.rolname = s.owner;

-- The spaces the calling role may read ('read'), write ('write') or manage ('own').
CREATE FUNCTION lore_spaces(need text, who name DEFAULT current_user) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
    SELECT coalesce(array_agg(m.space), '{}') FROM public.space_members m
    JOIN pg_catalog.pg_roles r ON r.oid = m.role AND r.rolname = who
    WHERE CASE WHEN who = session_user THEN true
               ELSE pg_catalog.pg_has_role(session_user, r.oid, 'USAGE') END
      AND CASE need WHEN 'read' THEN true
                    WHEN 'write' THEN m.level IN ('owner', 'member')
                    WHEN 'own' THEN m.level = 'owner'
                    ELSE false END
$f$;
REVOKE ALL ON FUNCTION lore_spaces(text, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lore_spaces(text, name) TO PUBLIC;

-- A new space belongs to the role creating it; personal spaces are named for their owner.
CREATE FUNCTION lore_space_claim() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        NEW.name := OLD.name; NEW.owner := OLD.owner; NEW.kind := OLD.kind;
        NEW.created_at := OLD.created_at;
        RETURN NEW;
    END IF;
    NEW.owner := current_user;
    NEW.kind := CASE WHEN NEW.name = 'personal' OR NEW.name LIKE 'personal.%'
                     THEN 'personal' ELSE 'team' END;
    IF NEW.name LIKE 'personal.%' AND NEW.name <> 'personal.' || current_user THEN
        RAISE EXCEPTION 'space % is the personal space of another role', NEW.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $f$;
CREATE TRIGGER spaces_claim BEFORE INSERT OR UPDATE ON spaces
    FOR EACH ROW EXECUTE FUNCTION lore_space_claim();

-- ...and its creator is its first owner (definer: nobody owns the space before this row).
CREATE FUNCTION lore_space_founder() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    INSERT INTO public.space_members (space, role, level, added_by)
    SELECT NEW.name, r.oid::regrole, 'owner', NEW.owner FROM pg_catalog.pg_roles r
    WHERE r.rolname = NEW.owner;
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION lore_space_founder() FROM PUBLIC;
CREATE TRIGGER spaces_founder AFTER INSERT ON spaces
    FOR EACH ROW EXECUTE FUNCTION lore_space_founder();

-- The creator stays owner; a personal space admits nobody else.
CREATE FUNCTION lore_member_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    creator name;
    space_kind text;
BEGIN
    SELECT s.owner, s.kind INTO creator, space_kind FROM public.spaces s
    WHERE s.name = CASE WHEN TG_OP = 'INSERT' THEN NEW.space ELSE OLD.space END;
    IF TG_OP <> 'INSERT' AND OLD.role::oid = (SELECT oid FROM pg_catalog.pg_roles
                                              WHERE rolname = creator) THEN
        RAISE EXCEPTION 'the creator of space % stays its owner', OLD.space
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'INSERT' AND space_kind = 'personal' AND pg_catalog.pg_get_userbyid(NEW.role)
            IS DISTINCT FROM creator THEN
        RAISE EXCEPTION 'space % is personal: nobody can be added to it', NEW.space
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' THEN  -- only the level changes (added_by: the column grants)
        NEW.space := OLD.space; NEW.role := OLD.role; NEW.added_by := OLD.added_by;
        NEW.added_at := OLD.added_at;
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $f$;
CREATE TRIGGER space_members_guard BEFORE INSERT OR UPDATE OR DELETE ON space_members
    FOR EACH ROW EXECUTE FUNCTION lore_member_guard();

-- Provenance the client cannot forge.
CREATE FUNCTION lore_stamp() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.author := current_user;
    ELSE
        NEW.author := OLD.author;
    END IF;
    RETURN NEW;
END $f$;
CREATE FUNCTION lore_stamp_fragment() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.machine := nullif(current_setting('lore.machine', true), '');
        NEW.authored_at := extract(epoch FROM clock_timestamp());
    ELSE
        NEW.machine := OLD.machine;
        NEW.authored_at := OLD.authored_at;
    END IF;
    RETURN NEW;
END $f$;
ALTER TABLE fragments ADD COLUMN machine text, ADD COLUMN authored_at double precision;
CREATE TRIGGER fragments_provenance BEFORE INSERT OR UPDATE ON fragments
    FOR EACH ROW EXECUTE FUNCTION lore_stamp_fragment();
"""

_READ = "(space = ANY ((SELECT lore_spaces('read'))::text[]))"
_WRITE = "(space = ANY ((SELECT lore_spaces('write'))::text[]))"
_OWN = "(space = ANY ((SELECT lore_spaces('own'))::text[]))"
_MINE = "(author = current_user AND space = ANY ((SELECT lore_spaces('write'))::text[]))"


def _protect(table: str, read: str, write: str) -> str:
    """Author column, trigger, RLS forced, the four policies, the privileges of PUBLIC."""
    return f"""
ALTER TABLE {table} ADD COLUMN author name NOT NULL DEFAULT current_user;
CREATE TRIGGER {table}_author BEFORE INSERT OR UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION lore_stamp();
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY {table}_read ON {table} FOR SELECT USING {read};
CREATE POLICY {table}_add ON {table} FOR INSERT WITH CHECK {write};
CREATE POLICY {table}_change ON {table} FOR UPDATE USING {write} WITH CHECK {write};
CREATE POLICY {table}_remove ON {table} FOR DELETE USING {write};
GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO PUBLIC;
"""


_SPACES = f"""
ALTER TABLE spaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE spaces FORCE ROW LEVEL SECURITY;
-- The creator sees the row at once: the membership row follows the insert (and an insert
-- naming its conflict target checks the new row against this policy).
CREATE POLICY spaces_read ON spaces FOR SELECT
    USING (owner = current_user OR name = ANY ((SELECT lore_spaces('read'))::text[]));
CREATE POLICY spaces_add ON spaces FOR INSERT WITH CHECK (owner = current_user);
CREATE POLICY spaces_change ON spaces FOR UPDATE
    USING (name = ANY ((SELECT lore_spaces('write'))::text[]))
    WITH CHECK (name = ANY ((SELECT lore_spaces('write'))::text[]));
-- A member records the space's embedding model with its first vector; nothing else changes.
GRANT SELECT, INSERT (name, created_at) ON spaces TO PUBLIC;
GRANT UPDATE (embed_model, embed_dim, vector_epoch) ON spaces TO PUBLIC;

ALTER TABLE space_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE space_members FORCE ROW LEVEL SECURITY;
CREATE POLICY space_members_read ON space_members FOR SELECT USING {_READ};
CREATE POLICY space_members_add ON space_members FOR INSERT WITH CHECK {_OWN};
CREATE POLICY space_members_change ON space_members FOR UPDATE USING {_OWN} WITH CHECK {_OWN};
CREATE POLICY space_members_remove ON space_members FOR DELETE USING {_OWN};
GRANT SELECT, INSERT (space, role, level), UPDATE (level), DELETE ON space_members TO PUBLIC;

GRANT SELECT ON lore_schema TO PUBLIC;
CREATE INDEX fragments_author ON fragments (space, author);
"""

MIGRATION = (_PREAMBLE
             + "".join(_protect(t, _READ, _WRITE) for t in SHARED)
             + "".join(_protect(t, _MINE, _MINE) for t in OWN_ROWS)
             + _SPACES)
