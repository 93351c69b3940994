"""Migration 5 of the hub's schema (issue 28): a fragment's memory state in a narrow table.

Recall rewrites a fragment's memory state on every query (reinforcement), the consolidation
cycle rewrites every score once a day (phase 0), and the usefulness loop counts what recall
returned and what was used. In the `fragments` row those updates sat beside the 2 KB vector:
a page had no room for a second version of the row, so no update was HOT and every index,
pgvector's HNSW among them, took a new entry (phase 0: 23.9 s at 10K, against 0.42 s on
SQLite). `fragment_state` holds those columns alone, about 200 bytes a row, keyed by
(space, id) with its primary key as its only index and half of each page left free, so an
update is HOT and touches no index.

- The live values are `fragment_state`'s. `fragments` keeps its columns of the same names as
  the state a fragment was born with: every insert path (insert, push's staging copy, a
  member's own SQL) writes them as before, and a statement trigger copies the new rows into
  `fragment_state` in the same transaction, so no path can create a fragment without state.
  Readers take the state from `fragment_state` (hub/state.py), falling back to the born state
  only if a state row were ever missing.
- A state row goes only with its fragment (ON DELETE CASCADE, which row-level security does
  not filter, as for edges): no member may delete one (policy dropped, privilege revoked),
  so forgetting keeps migration 3's author/owner rule and journal, unchanged.
- Access is migration 2's (`_protect`): every member who reads the space reads the state,
  and only owners and members write it. A reader's recall does not reinforce a team space:
  reinforcement and usefulness change the ranking and the decay every member sees, which is
  writing the space, and migration 2 already filtered a reader's update of `fragments` the
  same way (the update touches no row, no error), so nothing a reader does changes.
- The move is one INSERT .. SELECT in the migration's own transaction (schema.py): a run
  killed midway leaves version 4 and no table, and the next `lore hub init` does it whole.
  The author of each state row is its fragment's (the stamp trigger is held off for the
  copy; after it, the trigger stamps the inserting member, who is the fragment's author)."""

from __future__ import annotations

from .access_sql import _READ, _WRITE, _protect

TABLE = "fragment_state"
# What recall, the cycle and the usefulness loop change, in fragment_state only.
STATE = ("access_count", "decay_rate", "last_accessed", "last_reinforced", "relevance_score")
_BORN = ", ".join(STATE)

MIGRATION = f"""
CREATE TABLE fragment_state (
    space text NOT NULL,
    id text COLLATE "C" NOT NULL,
    access_count integer NOT NULL DEFAULT 0,
    decay_rate double precision NOT NULL,
    last_accessed double precision NOT NULL,
    last_reinforced double precision NOT NULL,
    relevance_score double precision NOT NULL,
    returned integer NOT NULL DEFAULT 0,       -- times recall returned it (usefulness)
    used integer NOT NULL DEFAULT 0,           -- times the assistant then used it
    ignored_streak integer NOT NULL DEFAULT 0, -- recalls ignored in a row since the last use
    use_updated_at double precision,
    PRIMARY KEY (space, id),
    FOREIGN KEY (space, id) REFERENCES fragments(space, id) ON DELETE CASCADE
) WITH (fillfactor = 50);
{_protect(TABLE, _READ, _WRITE)}
DROP POLICY fragment_state_remove ON fragment_state;
REVOKE DELETE ON fragment_state FROM PUBLIC;

ALTER TABLE fragment_state DISABLE TRIGGER fragment_state_author;
INSERT INTO fragment_state (space, id, {_BORN}, author)
    SELECT f.space, f.id, {", ".join(f"f.{c}" for c in STATE)}, f.author FROM fragments f;
ALTER TABLE fragment_state ENABLE TRIGGER fragment_state_author;

-- Not SECURITY DEFINER: the state row is inserted as the member who inserted the fragment,
-- who may write the space (the fragment's own insert policy said so).
CREATE FUNCTION lore_state_born() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    INSERT INTO public.fragment_state (space, id, {_BORN})
    SELECT b.space, b.id, {", ".join(f"b.{c}" for c in STATE)} FROM born b;
    RETURN NULL;
END $f$;
REVOKE ALL ON FUNCTION lore_state_born() FROM PUBLIC;
CREATE TRIGGER fragments_state_born AFTER INSERT ON fragments
    REFERENCING NEW TABLE AS born FOR EACH STATEMENT EXECUTE FUNCTION lore_state_born();
"""
