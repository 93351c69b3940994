"""The team space's part of the per-prompt notes (issue 29): in a repository that shares into
a team space, the running MCP server also looks in that space for knowledge that answers the
prompt, by the same rules as in the member's own memory (prompt_recall.py), and each note
names its author, the role the database stamped on it ("from: alice, stated").

The team space is opened on a daemon thread when the server starts, never on a prompt's clock:
until it is open, or while it cannot be reached (retried after RETRY_AFTER seconds), prompts
get the member's own notes alone. Trust is the brief's rule: what an agent stored or the
extractor inferred appears only once someone confirmed it. The notes share one data frame
with the member's own, neutralised like them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import LoreError
from ..core.types import Fragment
from ..safety.frame import neutralise
from . import prompt_recall as pr
from . import render
from .memory import Memory

log = logging.getLogger("lore.server")
RETRY_AFTER = 30.0  # seconds before a team space that failed to open is tried again
WARM_QUERY = "warm up the team space"
WARM_WAIT = 120.0  # seconds the opener waits for the server's model before warming up


class PromptVector:
    """An embedder that remembers its last single text's vector: the member's memory and the
    team's each embed the same prompt, and on a busy machine one embedding is 20-40 ms of
    the hook's 250. Everything else is the wrapped embedder's."""

    def __init__(self, embedder: Any) -> None:
        self._inner = embedder
        self._last: tuple[str, Any] | None = None
        self._guard = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        if len(texts) != 1:
            return self._inner.embed(texts)
        last = self._last
        if last is not None and last[0] == texts[0]:
            return last[1]
        vectors = self._inner.embed(texts)
        with self._guard:
            self._last = (texts[0], vectors)
        return vectors

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def trusted(frag: Fragment) -> bool:
    """As hooks/brief.trusted_for_brief: agent-stored or inferred needs a confirmation."""
    return frag.confirmed_at is not None or (frag.source != "agent" and frag.basis != "inferred")


class TeamNotes:
    """One team space for one server: `opener` gives its Memory (LoreError when it cannot)."""

    def __init__(self, space: str, opener: Callable[[], Memory],
                 warm: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.space, self._opener, self._clock = space, opener, clock
        self._warm = warm  # set when the server's model is loaded
        self.memory: Memory | None = None
        self._failed_at: float | None = None
        self._opening = threading.Lock()
        self.lock = threading.Lock()  # one prompt at a time on the team's Memory

    def open_soon(self) -> None:
        """Opens the space on a daemon thread, unless it is open, opening, or failed lately."""
        if self.memory is not None or self._opening.locked():
            return
        if self._failed_at is not None and self._clock() - self._failed_at < RETRY_AFTER:
            return
        threading.Thread(target=self._open, name="lore-team-open", daemon=True).start()

    def _open(self) -> None:
        with self._opening:
            if self.memory is not None:
                return
            try:
                memory = self._opener()
                # One query by words now, and one by meaning once the model is loaded: the
                # pool's connection, the plans and the vector path are then ready, and the
                # first prompt does not pay for them.
                pr.strong_by_words(memory.reader, WARM_QUERY, set(), min_terms=1)
                self.memory = memory
                if self._warm is not None and self._warm.wait(WARM_WAIT):
                    with self.lock, memory.reader.read():  # type: ignore[attr-defined]
                        pr.strong_by_cosine(memory, WARM_QUERY, set())
                log.info("team space %s warm for the per-prompt notes", self.space)
            except LoreError as exc:
                self._failed_at = self._clock()
                log.warning("team space %s not reached: %s", self.space, exc)

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None

    def kept(self, team: Memory, frags: list[Fragment], authors: dict[str, str]
             ) -> list[Fragment]:
        """The notes that may be shown: a teammate's only when trusted."""
        return [f for f in frags if trusted(f)]

    def found(self, prompt: str, seen: set[str], warm: bool, project: str | None = None
              ) -> list[tuple[Fragment, str]]:
        """(note, its author) for the prompt, best first; [] while the space is not open.
        `project`: the asking session's, which the ranking prefers (None keeps the last)."""
        team = self.memory
        if team is None:
            self.open_soon()
            return []
        if not self.lock.acquire(timeout=pr.LOCK_WAIT):
            return []
        started = time.perf_counter()
        try:
            if project is not None:
                team.project = project
            # One connection and one snapshot for the whole search: each statement alone
            # would take a pooled connection and check it first, twice the round trips.
            with team.reader.read():  # type: ignore[attr-defined]
                frags = (pr.strong_by_cosine(team, prompt, seen) if warm
                         else pr.strong_by_words(team.reader, prompt, seen))
                authors = team.reader.authors([f.id for f in frags])  # type: ignore[attr-defined]
                frags = self.kept(team, frags, authors)
        except LoreError as exc:  # the hub went away: the member's own notes still come
            log.warning("team space %s: %s", self.space, exc)
            return []
        finally:
            self.lock.release()
        log.info("team space %s: %d note(s) in %.0f ms", self.space, len(frags),
                 (time.perf_counter() - started) * 1000)
        return [(f, str(authors.get(f.id, "unknown"))) for f in frags]


def team_line(frag: Fragment, author: str, room: int) -> str | None:
    """One team note in at most `room` characters: id, text, author and how it was known."""
    return note_line(frag, f"{render.authored_label(frag, neutralise(author))}, "
                           f"{render.when(frag.created_at)}", room)


def note_line(frag: Fragment, label: str, room: int) -> str | None:
    """A note of another space: id, neutralised text clipped to fit, then `label` (who knew
    it, how, when) whole; None when the room cannot hold a useful part of the text."""
    head = f"- [{render.short_id(frag.id)}] "
    tail = f" ({label})"
    body = frag.summary
    if frag.content and frag.content.strip() != frag.summary.strip():
        body += " — " + frag.content
    space = room - len(head) - len(tail)
    if space < pr.MIN_ITEM_CHARS:
        return None
    return head + render.clip(neutralise(body), space) + tail
