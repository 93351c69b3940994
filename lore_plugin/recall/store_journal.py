"""Accepting a store_memory request (issue 27): its answer waits for a durable journal row of
the request (store/journal.py), not for its placement.

The acceptor is one thread: it takes every request queued meanwhile, checks each as placement
would (non-empty text, a depth in range, a parent that exists or is itself still in the
journal, at the right depth), redacts its text, reserves its fragment id and writes them all
in one transaction; then each caller hears its id, and the requests go on, in journal order,
to the group writer (group_commit.py), which places them as store_memory always did. No
model runs here. A crash after the commit loses nothing: whoever starts the writer next
places what the journal holds first (`leftovers`)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.cues import clean_cues
from ..core.errors import InvalidInput
from ..core.faults import crash_point
from ..safety.redact import redact
from ..store import Store, StoreError, new_id
from ..store.journal import StoreJournal
from .group_requests import StoreRequest, take
from .memory_base import MAX_DEPTH, _check_range, _check_text
from .storing import Stored

log = logging.getLogger(__name__)
MAX_ACCEPT = 256  # requests a journal transaction


@dataclass(frozen=True)
class Accepted:
    """A request in the journal: its reserved id (what the fragment will be, or a redirect to
    the one it repeats), its place in line, and its placement's answer to come. `idle`: the
    writer had nothing else to do when it came, so placement should follow at once."""
    fid: str
    seq: int
    request: StoreRequest
    placed: Future[Stored]
    idle: bool = False


# One caller's request, its acceptance's future and its placement's.
_Waiting = tuple[StoreRequest, "Future[Accepted]", "Future[Stored]"]


def checked(request: StoreRequest) -> StoreRequest:
    """The request as the journal keeps it: its text and cues checked, stripped and redacted
    (no secret is written unredacted, even for the moment before placement), its depth in
    range."""
    content = _check_text(request.content, "content")
    summary = _check_text(request.summary, "summary")
    _check_range(request.depth, "depth", 0, MAX_DEPTH)
    cues = clean_cues(redact(clean_cues(request.cues)))
    return replace(request, content=redact(content), summary=redact(summary), cues=cues)


def from_row(seq: int, fid: str, project: str | None, request: dict) -> StoreRequest:
    return StoreRequest(request["content"], request["summary"], request.get("parent_id"),
                        int(request["depth"]), request.get("source") or "agent",
                        float(request.get("importance", 0.6)), project, fid=fid, seq=seq,
                        cues=clean_cues(request.get("cues")))  # none in a row before cues


class Acceptor:
    """The accepting thread. `hand_on(items, leftover)` passes accepted requests, in journal
    order, to the writer (called on this thread); the leftovers of an earlier process come
    first, before any new request is accepted."""

    def __init__(self, journal: Path, db_path: Path,
                 hand_on: Callable[[list[tuple[StoreRequest, Future[Stored]]]], bool],
                 clock: Callable[[], float] = time.time) -> None:
        self.journal_path, self.db_path = journal, db_path
        self.hand_on, self.clock = hand_on, clock
        self.journal_error: str | None = None  # why the journal is not used, once it failed
        # Requests; or an int: hand on again the journal's rows up to that seq (a batch the
        # database refused, its rows still in the journal); None: the end.
        self._queue: queue.SimpleQueue[_Waiting | int | None] = queue.SimpleQueue()
        self._failure: BaseException | None = None  # the journal failed: placed directly now
        self.replayed = threading.Event()  # the leftovers are handed on
        self._thread = threading.Thread(target=self._run, name="lore-store-accept", daemon=True)
        self._thread.start()

    def submit(self, request: StoreRequest) -> tuple[Future[Accepted], Future[Stored]]:
        accepted: Future[Accepted] = Future()
        placed: Future[Stored] = Future()
        try:
            request = checked(request)
        except Exception as exc:  # noqa: BLE001 - bad arguments: refused at once, nothing written
            accepted.set_exception(exc)
            placed.set_exception(exc)
            return accepted, placed
        if self._failure is not None:
            self._direct((request, accepted, placed))
            return accepted, placed
        self._queue.put((request, accepted, placed))
        if self._failure is not None:  # it failed meanwhile, maybe after draining the queue
            self._drain_directly()
        return accepted, placed

    def _direct(self, waiting: _Waiting) -> None:
        """The journal cannot be used: the request goes straight to the writer, as before the
        journal, and is accepted only once it is placed (its answer then says where it went;
        durable in the database, not in a journal row)."""
        request, accepted, placed = waiting

        def answered(done: Future[Stored]) -> None:
            failure = done.exception()
            if failure is not None:
                accepted.set_exception(failure)
            else:
                accepted.set_result(Accepted(done.result().fragment.id, 0, request, placed,
                                             idle=True))
        placed.add_done_callback(answered)
        self.hand_on([(request, placed)])

    def again(self, through: int) -> None:
        """The writer could not place rows up to `through`: they are handed on once more."""
        self._queue.put(through)

    def close(self, timeout: float | None = None) -> None:
        """What was submitted is accepted (or refused), then the thread ends."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        journal = store = None
        try:
            journal = StoreJournal(self.journal_path)
            self._replay(journal)
            self.replayed.set()
            while True:
                taken, stopping = take(self._queue, MAX_ACCEPT)
                for through in [t for t in taken if isinstance(t, int)]:
                    self._replay(journal, through)
                taken = [t for t in taken if not isinstance(t, int)]
                if taken:
                    if store is None:
                        store = Store(self.db_path, readonly=True)
                    self._accept(journal, store, taken)
                if stopping:
                    return
        except StoreError as exc:  # the journal cannot be opened or written: one line
            self._give_up(exc)
        except BaseException as exc:  # noqa: BLE001 - a bug: the same fallback, with its trace
            log.exception("the store journal failed")
            self._give_up(exc)
        finally:
            for held in (store, journal):
                if held is not None:
                    held.close()

    def _replay(self, journal: StoreJournal, through: int | None = None) -> None:
        """An earlier process's accepted requests, placed before anything new; or (`through`)
        the rows the writer could not place, to be placed now."""
        rows = [r for r in journal.pending() if through is None or r[0] <= through]
        if rows:
            log.info("placing %d store(s) left in the journal", len(rows))
            self.hand_on([(from_row(seq, fid, project, request), Future())
                          for seq, fid, project, _, request in rows])

    def _accept(self, journal: StoreJournal, store: Store, taken: list[_Waiting]) -> None:
        fine: list[_Waiting] = []
        for request, accepted, placed in taken:
            try:
                fine.append((self._parent_checked(journal, store, request), accepted, placed))
            except Exception as exc:  # noqa: BLE001 - its own failure: its caller hears it
                accepted.set_exception(exc)
                placed.set_exception(exc)
        if not fine:
            return
        now = self.clock()
        fids = [new_id() for _ in fine]
        try:
            seqs = journal.add([(fid, r.project, now, r.__dict__) for fid, (r, _, _)
                                in zip(fids, fine)])
        except Exception as exc:  # noqa: BLE001 - nothing of it was written: each caller hears
            for _, accepted, placed in fine:
                accepted.set_exception(exc)
                placed.set_exception(exc)
            return
        crash_point("journal-after-commit")
        items = [(replace(r, fid=fid, seq=seq), placed)
                 for (r, _, placed), fid, seq in zip(fine, fids, seqs)]
        idle = self.hand_on(items)
        for (request, placed), (_, accepted, _) in zip(items, fine):
            accepted.set_result(Accepted(str(request.fid), int(request.seq or 0), request,
                                         placed, idle and len(items) == 1))

    @staticmethod
    def _parent_checked(journal: StoreJournal, store: Store, request: StoreRequest
                        ) -> StoreRequest:
        """The parent as placement will find it, checked now so that an answer of "stored"
        is not followed by a refusal: an existing fragment (a prefix or a reserved id that
        redirects resolved to its full id), or a request still in the journal."""
        if not request.parent_id:
            return request
        pending = journal.get(request.parent_id.strip().lower())
        if pending is not None:
            depth = int(pending[4]["depth"])
        else:
            parent = store.get(store.resolve_id(request.parent_id))
            if parent.superseded_by:
                raise InvalidInput(f"parent {parent.id[:12]} was superseded by "
                                   f"{parent.superseded_by[:12]}; store under that one instead")
            depth = parent.depth
            request = replace(request, parent_id=parent.id)
        if depth != request.depth - 1:
            raise InvalidInput(
                f"parent {str(request.parent_id)[:12]} is at depth {depth}, so a child must be at "
                f"depth {depth + 1}, not {request.depth}")
        return request

    def _give_up(self, exc: BaseException) -> None:
        """From now on (until restart) stores are placed directly, without the journal; what
        was queued meanwhile too. Whatever the journal already held stays there for the next
        start that can read it."""
        self.journal_error = str(exc)
        log.warning("store_memory places directly, without its journal, until restart: %s", exc)
        self._failure = exc
        self.replayed.set()
        self._drain_directly()

    def _drain_directly(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, tuple):
                self._direct(item)
