"""What extraction does with a fact memory already holds: it is not stored again. The fact
held is reinforced, confirmed when the user stated it again, and keeps the repeat's cues
beside its own (core/cues.join_cues), as store_memory's repeat does (recall/storing.py): the
words the repeat came with are ways to ask for the same note."""

from __future__ import annotations

from ..core.cues import join_cues
from ..recall.memory import Memory
from ..recall.storing import near_duplicate
from ..store import Store
from .linking import Planned


class Repeats:
    """The held fragments one extraction repeats, and the cues it gave them."""

    def __init__(self) -> None:
        self.cues: dict[str, str] = {}  # held fragment id -> the repeats' cues, joined

    def add(self, fid: str, cues: str) -> None:
        """A repeat of `fid` came with `cues` (clean_cues's form)."""
        if cues:
            self.cues[fid] = join_cues(self.cues.get(fid), cues)

    def near_duplicates(self, memory: Memory, planned: list[Planned],
                        confirmed: list[str]) -> None:
        """A planned fragment that repeats a live sibling under its existing parent (the
        same check as store_memory's, storing.near_duplicate) is not added: the sibling is
        reinforced, confirmed when the user stated it again, takes the planned children,
        and is given the planned cues (join_cues, written with the extraction)."""
        found: dict[int, str] = {}
        for item in planned:  # parents come before their children
            if item.parent_key is not None and item.parent_key in found:
                item.parent_id = found[item.parent_key]
                item.parent_key = None
            if item.parent_key is None and item.parent_id and item.new.depth > 0:
                same = near_duplicate(memory, item.new.summary, item.new.content, item.vector,
                                      item.parent_id, item.new.depth)
                if same:
                    item.duplicate_of = found[item.key] = same
                    self.add(same, item.new.cues)
                    if item.new.basis == "stated":
                        confirmed.append(same)
        memory.reinforce(list(dict.fromkeys(found.values())))

    def join_cues(self, store: Store) -> int:
        """Inside the extraction's write transaction: each held fragment's cues become its
        own joined with the repeats', read here so that a change made since the extraction
        began is kept. A fragment gone meanwhile is skipped. Returns how many changed."""
        held = store.get_many(list(self.cues), with_parent=False) if self.cues else {}
        changed = 0
        for fid, frag in held.items():
            joined = join_cues(frag.cues, self.cues[fid])
            if joined != frag.cues:
                store.update_text(fid, cues=joined)
                changed += 1
        return changed
