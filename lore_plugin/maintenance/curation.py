"""Curation: a person fixing what memory holds. Edit, correct, forget, move, merge and confirm,
each through the memory engine's store (so FTS follows through its triggers and the vector
index through the vector epoch) and each written to a journal that can undo it until the next
consolidation, which may have built on the change (merged, re-summarised, linked it).

Forgetting is the one action that cannot be undone: it erases the text for good (zeroed pages,
FTS merged, WAL truncated), and keeping a copy to bring it back would defeat it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.cues import unjoin_cues
from ..core.errors import InvalidInput, NotFound
from ..core.types import Fragment, NewFragment
from ..embedding.embedder import to_blob
from ..recall.heading_names import PLACED_NAME
from ..recall.memory import Memory, embedding_text
from ..recall.render import clip, short_id
from ..safety.redact import redact
from .operations import forget_fragments

log = logging.getLogger(__name__)
FORGET_NOTE = "cannot be undone: forgetting erases the text for good"


@dataclass(frozen=True)
class Entry:
    """One journal line as the activity page shows it."""

    id: int
    at: float
    action: str
    fragment_id: str
    label: str
    undone_at: float | None
    undoable: bool
    why_not: str  # when not undoable: why, in plain words


class Curator:
    def __init__(self, memory: Memory, clock: Callable[[], float] | None = None) -> None:
        self.memory = memory
        self.clock = clock or memory.clock

    @property
    def store(self):  # noqa: ANN201 - the memory's writable Store
        return self.memory.writer

    def _live(self, fid: str) -> Fragment:
        frag = self.store.get(self.store.resolve_id(fid))
        if frag.superseded_by:
            raise InvalidInput(f"{short_id(frag.id)} was superseded by "
                               f"{short_id(frag.superseded_by)}; change that one instead")
        return frag

    def _vector(self, summary: str, content: str, parent_id: str | None) -> bytes | None:
        parent = self.store.get(parent_id).summary if parent_id else None
        vector = self.memory.embed_one(embedding_text(summary, content, parent))
        return None if vector is None else to_blob(vector)

    def _refresh_vectors(self, ids: list[str]) -> None:
        """After a change commits: the fragments whose parent, or whose parent's summary,
        changed get vectors for their new context. Best effort, outside the write lock; the
        change itself stands either way."""
        try:
            self.memory.reembed(ids)
        except Exception as exc:  # a model failure must not undo a person's edit
            log.warning("could not re-embed %d fragment(s) after curation: %s", len(ids), exc)

    # -- actions ------------------------------------------------------------------------------
    def edit(self, fid: str, summary: str, content: str) -> Fragment:
        """New text for the same fragment, re-embedded; its history and links stay."""
        frag = self._live(fid)
        # Redacted before anything is built from it: the journal's label quotes the summary
        # (and clipping raw text could cut a secret to a piece redaction no longer knows).
        summary = redact(_text(summary, "summary"))
        content = redact(_text(content, "content", allow_empty=True) or summary)
        if (summary, content) == (frag.summary, frag.content):
            return frag
        vector = self._vector(summary, content, frag.parent_id)
        undo = {"summary": frag.summary, "content": frag.content}
        with self.store.write():
            self.store.update_text(frag.id, summary, content, vector)
            meta = self.store.get(frag.id).metadata
            if PLACED_NAME in meta:  # a person named it: consolidation never renames it now
                self.store.set_metadata(frag.id, {k: v for k, v in meta.items()
                                                  if k != PLACED_NAME})
            self.store.journal_add("edit", frag.id, f"edited “{clip(summary, 60)}”", undo,
                                   self.clock())
        if summary != frag.summary:
            self._refresh_vectors(self.store.child_ids(frag.id))
        return self.store.get(frag.id)

    def correct(self, fid: str, summary: str, content: str) -> Fragment:
        """A new fragment in the same place supersedes the old one, which stays as history;
        the old one's children move under the correction."""
        old = self._live(fid)
        summary, content = _text(summary, "summary"), _text(content, "content", allow_empty=True)
        content = redact(content or summary)
        summary = redact(summary)
        vector = self._vector(summary, content, old.parent_id)
        now = self.clock()
        new = NewFragment(content=content, summary=summary, depth=old.depth,
                          importance=old.importance, project=old.project, source="viewer",
                          confirmed_at=now, metadata={"corrects": old.id})
        with self.store.write():
            nid = self.store.insert(new, now, vector, old.parent_id)
            children = self.store.child_ids(old.id)
            self.store.reparent_children(old.id, nid, now)
            self.store.supersede(old.id, nid, now)
            self.store.journal_add("correct", nid, f"corrected “{clip(old.summary, 40)}” → "
                                   f"“{clip(summary, 40)}”",
                                   {"old": old.id, "new": nid, "children": children,
                                    "mentions": [old.id, nid, *children]}, now)
        if summary != old.summary:
            self._refresh_vectors(children)
        return self.store.get(nid)

    def forget(self, fid: str, with_children: bool) -> list[str]:
        """Deletes a fragment, and with `with_children` its whole subtree, exactly as `lore
        forget` does (maintenance.forget_fragments), and notes it in the journal."""
        return forget_fragments(self.store, Path(self.memory.db_path), fid, with_children,
                                self.clock(), journal=True)

    def move(self, fid: str, parent_id: str) -> Fragment:
        frag = self._live(fid)
        if frag.depth == 0:
            raise InvalidInput("a topic has no parent: merge it into another topic instead")
        parent = self._live(parent_id)
        if parent.depth != frag.depth - 1:
            raise InvalidInput(f"a {frag.depth}-deep fragment goes under a fragment at depth "
                               f"{frag.depth - 1}; {short_id(parent.id)} is at {parent.depth}")
        if parent.id == frag.parent_id:
            return frag
        now = self.clock()
        with self.store.write():
            self.store.link(parent.id, frag.id, "hierarchical", 1.0, now)
            self.store.journal_add("move", frag.id, f"moved “{clip(frag.summary, 40)}” under "
                                   f"“{clip(parent.summary, 40)}”",
                                   {"from": frag.parent_id,
                                    "mentions": [frag.id, *filter(None, [frag.parent_id])]},
                                   now)
        self._refresh_vectors([frag.id])
        return self.store.get(frag.id)

    def merge(self, victim_id: str, survivor_id: str) -> Fragment:
        """Merges one topic into another as consolidation does: children and associations
        move to the survivor, which supersedes the victim."""
        victim, survivor = self._live(victim_id), self._live(survivor_id)
        if victim.depth != 0 or survivor.depth != 0:
            raise InvalidInput("only topics merge; move a concept or fact instead")
        if victim.id == survivor.id:
            raise InvalidInput("a topic cannot be merged into itself")
        store, now = self.store, self.clock()
        with store.write():
            undo = {"victim": victim.id, "survivor": survivor.id,
                    "children": store.child_ids(victim.id, include_superseded=True),
                    "victim_links": store.associative_of(victim.id),
                    "survivor_links": store.associative_of(survivor.id),
                    "survivor_cues": store.get(survivor.id).cues}  # the merge joins the victim's
            undo["mentions"] = [victim.id, survivor.id, *undo["children"]]
            if store.merge_topic(victim.id, survivor.id, now) is None:
                raise InvalidInput("one of the topics changed meanwhile; reload and try again")
            store.journal_add("merge", survivor.id, f"merged “{clip(victim.summary, 40)}” into "
                              f"“{clip(survivor.summary, 40)}”", undo, now)
        self._refresh_vectors(undo["children"])
        return store.get(survivor.id)

    def confirm(self, fid: str) -> Fragment:
        frag = self._live(fid)
        if frag.confirmed_at is not None:
            return frag
        now = self.clock()
        with self.store.write():
            self.store.confirm([frag.id], now)
            self.store.journal_add("confirm", frag.id, f"confirmed “{clip(frag.summary, 60)}”",
                                   {"confirmed_at": now, "mentions": [frag.id]}, now)
        return self.store.get(frag.id)

    # -- the journal --------------------------------------------------------------------------
    def _consolidated(self) -> tuple[float, float] | None:
        """(when the last consolidation started, when it finished)."""
        last = self.store.last_consolidation()
        return (last["started_at"], last["finished_at"] or last["started_at"]) if last else None

    def history(self, limit: int = 50) -> list[Entry]:
        run = self._consolidated()
        if run is not None:  # what that run did (stamped with its start) stays undoable
            self.store.journal_drop_undo(before=run[0] - 0.001)  # until the next one
        out = []
        for e in self.store.journal(limit):
            # A supersession keeps only two ids, and undoing it checks that it still stands:
            # no consolidation since can make that unsafe, and consolidation makes them too.
            own = run is not None and e["at"] >= run[0] and e["undo"].get("by") == "consolidation"
            since = (run is not None and e["at"] <= run[1] and e["action"] != "supersede"
                     and not own)
            why = ("undone" if e["undone_at"] else FORGET_NOTE if e["action"] == "forget"
                   else "a consolidation ran since" if since
                   else "its details are gone" if not e["undo"] else "")
            out.append(Entry(e["id"], e["at"], e["action"], e["fragment_id"], e["label"],
                             e["undone_at"], not why, why))
        return out

    def undo(self, entry_id: int) -> str:
        entry = self.store.journal_entry(entry_id)
        if entry is None:
            raise NotFound(f"no journal entry {entry_id}")
        found = {e.id: e for e in self.history(200)}.get(entry_id)
        if found is None or not found.undoable:
            raise InvalidInput(f"“{entry['label']}” {found.why_not if found else 'is too old'}; "
                               "it cannot be undone")
        do = entry["undo"]
        if entry["action"] == "edit":  # embedded and redacted before the write lock, not under it
            do["summary"], do["content"] = redact(do["summary"]), redact(do["content"])
            frag = self.store.get(entry["fragment_id"])
            do["vector"] = self._vector(do["summary"], do["content"], frag.parent_id)
        store, now = self.store, self.clock()
        with store.write():
            if not store.journal_undone(entry_id, now):
                raise InvalidInput("it was undone already")
            getattr(self, f"_undo_{entry['action']}")(entry["fragment_id"], do, now)
        self._refresh_vectors(self._context_restored(entry["action"], entry["fragment_id"], do))
        return f"undid: {entry['label']}"

    def _context_restored(self, action: str, fid: str, do: dict) -> list[str]:
        """The fragments an undo gave their old parent, or their parent's old summary, back."""
        if action == "edit":
            return self.store.child_ids(fid)
        if action in ("correct", "merge"):
            return list(do["children"])
        return [fid] if action == "move" else []

    def _undo_edit(self, fid: str, do: dict, now: float) -> None:
        self.store.update_text(fid, do["summary"], do["content"], do["vector"])

    def _undo_correct(self, fid: str, do: dict, now: float) -> None:
        store = self.store
        if not store.unsupersede(do["old"], do["new"]):
            raise InvalidInput("the corrected fragment changed since; it cannot be undone")
        self._give_back(do["children"], do["new"], do["old"], now)
        store.delete(do["new"], now)

    def _give_back(self, children: list[str], holder: str, owner: str, now: float) -> None:
        """Children an action moved from `owner` to `holder` go back, unless moved since."""
        for child in children:
            if self.store.parent_id(child) == holder:
                self.store.link(owner, child, "hierarchical", 1.0, now)

    def _undo_move(self, fid: str, do: dict, now: float) -> None:
        if do["from"] is None:
            self.store.detach(fid)
        else:
            self.store.link(do["from"], fid, "hierarchical", 1.0, now)

    def _undo_merge(self, fid: str, do: dict, now: float) -> None:
        store = self.store
        if not store.unsupersede(do["victim"], do["survivor"]):
            raise InvalidInput("the merged topic changed since; it cannot be undone")
        self._give_back(do["children"], do["survivor"], do["victim"], now)
        store.set_associative(do["survivor"], do["survivor_links"], now)
        store.set_associative(do["victim"], do["victim_links"], now)
        if "survivor_cues" in do:  # the cues the victim brought go back with it
            held = store.get(do["survivor"]).cues
            kept = unjoin_cues(held, do["survivor_cues"], store.get(do["victim"]).cues)
            if kept != held:
                store.update_text(do["survivor"], cues=kept)

    def _undo_supersede(self, fid: str, do: dict, now: float) -> None:
        """Extraction or consolidation replaced a fact: the old one is live again, the new
        one stays (it may hold knowledge of its own; forget it if it is wrong)."""
        if not self.store.unsupersede(do["old"], do["new"]):
            raise InvalidInput("that fact was changed since; it cannot be undone")

    def _undo_confirm(self, fid: str, do: dict, now: float) -> None:
        self.store.unconfirm(fid, do["confirmed_at"])


def _text(value: str, name: str, allow_empty: bool = False) -> str:
    text = (value or "").strip() if isinstance(value, str) else ""
    if not text and not allow_empty:
        raise InvalidInput(f"{name} must not be empty")
    if len(text) > 20_000:
        raise InvalidInput(f"{name} is too long (20,000 characters at most)")
    return text
