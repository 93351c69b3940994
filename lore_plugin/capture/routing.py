"""Where a transcript's knowledge goes (issue 28): the local file, or the hub space its
project is routed to, and the bookkeeping that keeps "exactly once" across the two.

In a hub space, the space's own watermark (per machine, in the hub) commits with the
fragments, as the local watermark does in SQLite: a hub that is down or drops the connection
leaves it where it was, nothing is lost, and the next run catches up. Two local copies of it
are kept as hints, never as the truth:
- when a space first sees a transcript, it starts where the local file had got to, so the
  part already remembered locally is not extracted (and paid for) a second time;
- after a run, the local watermark follows the space's, so the Stop hook, which reads only
  the local file, does not find a batch due after every turn."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import cast

from ..core.config import Settings
from ..core.controls import transcript_cwd
from ..core.errors import ConfigError, LoreError
from ..core.project import project_key
from ..embedding.embedder import Embedder
from ..recall.cue_vector_fill import DueCues
from ..recall.cue_vector_upkeep import fill_after_write
from ..recall.memory import Memory
from ..recall.spaces import LOCAL
from .hub_link import open_memory

log = logging.getLogger("lore.capture")
FILL_MOST = 256  # notes a transcript's ingestion embeds the cues of, per hub space


def transcript_space(settings: Settings, path: Path, cwd: str | None = None) -> str:
    """The space the transcript's project writes to; LOCAL without a hub."""
    if not settings.hub_url:
        return LOCAL
    cwd = cwd or transcript_cwd(path)
    return settings.space_for(project_key(cwd) if cwd else None)


class Routes:
    """The hub spaces' memories an ingestor writes to, each opened once and dropped when the
    hub fails, so the next transcript tries it anew."""

    def __init__(self, settings: Settings, embedder: Embedder | None,
                 clock: Callable[[], float]) -> None:
        self.settings, self.embedder, self.clock = settings, embedder, clock
        self._open: dict[str, Memory] = {}

    def memory(self, space: str, local: Memory) -> Memory:
        """LoreError (a HubError) when the space cannot be reached."""
        if space == LOCAL:
            return local
        if space not in self._open:
            self._open[space] = open_memory(self.settings, space, self.embedder, self.clock)
        return self._open[space]

    def start_from_local(self, key: str, local: Memory, hub: Memory) -> None:
        """A transcript new to the space starts where the local file had got to."""
        here = local.writer.watermark(key)
        if here and not hub.writer.watermark(key):
            hub.writer.set_watermark(key, here, self.clock())

    def mirror(self, key: str, local: Memory, hub: Memory) -> None:
        """The local hint follows the space's watermark (best effort: a stale hint costs one
        worker start, no knowledge)."""
        try:
            there = hub.writer.watermark(key)
            if there > local.writer.watermark(key):
                local.writer.set_watermark(key, there, self.clock())
        except LoreError as exc:
            log.info("watermark hint for %s not updated: %s", key, exc)

    def ingest_into(self, space: str, key: str, local: Memory,
                    run: Callable[[Memory], None]) -> str | None:
        """`run` (the ingestion loop) on the space's memory; None when it ran, else why the
        hub could not be used (the transcript waits, its watermark unmoved)."""
        from ..hub import HubError

        try:
            hub = self.memory(space, local)
            self.start_from_local(key, local, hub)
            run(hub)
        except (HubError, ConfigError) as exc:
            self.drop(space)
            log.warning("hub space %s not reached; %s waits: %s", space, key, exc)
            return f"hub space {space} not reached: {exc}"
        self.mirror(key, local, hub)
        return None

    def fill_cue_vectors(self, most: int = FILL_MOST) -> int:
        """After a transcript's batches: the cue vectors its writes left due in the hub
        spaces written (a team space's share among them), with the ingestor's model, after
        their commits; at most `most` notes a space, so that a migrated hub's backlog does
        not hold up the queue (the cycle fills the rest). Best effort; returns how many
        notes got them."""
        return sum(fill_after_write(cast(DueCues, memory.writer), self.embedder,
                                    f"hub space {space}", most)
                   for space, memory in list(self._open.items()))

    def drop(self, space: str) -> None:
        memory = self._open.pop(space, None)
        if memory is not None:
            try:
                memory.close()
            except Exception:  # a broken pool: closing is best effort
                pass

    def close(self) -> None:
        for space in list(self._open):
            self.drop(space)
