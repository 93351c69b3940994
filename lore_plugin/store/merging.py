"""What consolidation's topic merging reads and writes: the candidates' vectors, and the merge
itself as one transaction, so a run killed between two merges leaves the graph consistent."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.cues import join_cues
from .fragments import Fragments


class Merging(Fragments):
    def topic_vectors(self) -> list[tuple[str, int, str, float, bytes]]:
        """(id, rowid, name, created_at, embedding) of every live, embedded topic."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT id, rowid, summary, created_at, embedding FROM fragments WHERE depth = 0 "
            "AND superseded_by IS NULL AND embedding IS NOT NULL ORDER BY created_at, rowid")]

    def child_vectors(self, parent_ids: Sequence[str]) -> list[tuple[str, str, str, bytes]]:
        """(parent id, id, summary, embedding) of the live, embedded children of the parents."""
        return [tuple(r) for r in self._rows_in(
            "SELECT e.source, f.id, f.summary, f.embedding FROM edges e "
            "JOIN fragments f ON f.id = e.target WHERE e.kind = 'hierarchical' "
            "AND e.source IN (%s) AND f.superseded_by IS NULL "
            "AND f.embedding IS NOT NULL ORDER BY f.created_at, f.rowid", parent_ids)]

    def merge_topic(self, victim: str, survivor: str, now: float) -> int | None:
        """One transaction: the victim's children move to the survivor, its associative edges
        follow them, the survivor's cues become its own joined with the victim's (either was
        a way to ask for what is now one topic), and the survivor supersedes it. Returns how
        many children moved, or None when either topic stopped being live since the caller
        looked."""
        with self.write():
            cues = dict(self.conn.execute("SELECT id, cues FROM fragments WHERE id IN (?, ?) "
                                          "AND superseded_by IS NULL", (victim, survivor)))
            if len(cues) != 2:
                return None
            both = join_cues(cues[survivor], cues[victim])
            if both != cues[survivor]:
                self.update_text(survivor, cues=both)
            moved = self.reparent_children(victim, survivor, now)
            for edge in self.edges_of(victim, ("associative",)):
                other = edge.target if edge.source == victim else edge.source
                if other != survivor:
                    self.upsert_associative([(survivor, other, edge.weight)], now)
            self.conn.execute("DELETE FROM edges WHERE kind = 'associative' AND "
                              "(source = ? OR target = ?)", (victim, victim))
            self.supersede(victim, survivor, now)
        return moved
