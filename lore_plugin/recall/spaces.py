"""Reads across spaces (issue 28): the local file and the hub spaces the user reads, fused into
one ranked answer in which every result names its space.

Each space ranks its own candidates with the full engine (memory.Memory), whose scores are
relative to that space's best match. Those are made comparable by what is absolute in every
backend: the cosine to the query (the same model everywhere, so the same scale) and the share
of the query's words a fragment's text holds (counted here, from the text, the same way for
SQLite and PostgreSQL, whose BM25 and ts_rank share no scale). A space's scores are scaled by
how well its best match does on that evidence against the best match of all spaces: the order
inside a space stays the engine's, and a space whose best is weak ranks below one whose best is
strong.

A space that cannot be reached, or does not answer in time, is left out and named in the
answer (`unreachable`); the others answer. An unreachable hub is tried again after RETRY_AFTER
seconds, so a long-lived server recovers when the hub comes back."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from ..core.errors import LoreError, NotFound
from ..core.types import Fragment, ScoredFragment, TreeNode
from .fusion import COSINE_SHARE, keyword_trust
from .memory import MAX_LIMIT, Memory
from .terms import held_terms, keyword_terms

log = logging.getLogger(__name__)
LOCAL = "local"
RETRY_AFTER = 30.0  # seconds before an unreachable hub space is tried again
WIDEN = 2  # each space returns this many times the asked limit, so the fusion can choose


@dataclass(frozen=True)
class SpaceHit:
    space: str
    scored: ScoredFragment

    @property
    def fragment(self) -> Fragment:
        return self.scored.fragment


@dataclass(frozen=True)
class FusedRecall:
    hits: list[SpaceHit]
    keyword_only: bool
    unreachable: dict[str, str] = field(default_factory=dict)  # space -> one line why


def word_share(terms: list[str], frag: Fragment) -> float:
    """The share of the query's keyword terms the fragment's text holds, 0..1."""
    if not terms:
        return 0.0
    return held_terms(terms, f"{frag.summary} {frag.content}") / len(terms)


def fuse(per_space: Mapping[str, list[ScoredFragment]], topic: str, limit: int) -> list[SpaceHit]:
    """One ranking from each space's own: see the module's docstring."""
    terms = keyword_terms(topic)
    shares = {space: [word_share(terms, s.fragment) for s in hits]
              for space, hits in per_space.items()}
    best_share = max((x for xs in shares.values() for x in xs), default=0.0)
    kw = (1 - COSINE_SHARE) * keyword_trust(best_share)  # as fusion.Fusion weighs BM25

    def evidence(s: ScoredFragment, share: float) -> float:
        return (1 - kw) * max(s.similarity, 0.0) + kw * share

    tops = {space: max((evidence(s, x) for s, x in zip(hits, shares[space], strict=True)),
                       default=0.0) for space, hits in per_space.items()}
    best = max(tops.values(), default=0.0)
    fused: list[tuple[float, SpaceHit]] = []
    for space, hits in per_space.items():
        top_score = max((s.score for s in hits), default=0.0)
        factor = tops[space] / best if best > 0 else 1.0
        for s in hits:
            score = (s.score / top_score if top_score > 0 else 0.0) * factor
            fused.append((score, SpaceHit(space, ScoredFragment(s.fragment, score, s.similarity))))
    fused.sort(key=lambda pair: pair[0], reverse=True)
    seen: set[str] = set()  # a pushed or pulled fragment is in two spaces under one id
    kept = []
    for _, hit in fused:
        if hit.fragment.id not in seen:
            seen.add(hit.fragment.id)
            kept.append(hit)
    return kept[:limit]


class Spaces:
    """The local memory and the hub spaces, each opened on first use. `hubs` maps a space's
    name to what opens its Memory (and may raise LoreError: the hub is down, the space does
    not exist)."""

    def __init__(self, local: Memory, hubs: Mapping[str, Callable[[], Memory]] | None = None,
                 timeout: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.local = local
        self._openers = dict(hubs or {})
        self._open: dict[str, Memory] = {}
        self._failed: dict[str, tuple[float, str]] = {}  # space -> (when, why)
        self.timeout = timeout
        self.clock = clock

    @property
    def names(self) -> list[str]:
        return [LOCAL, *self._openers]

    def memory(self, space: str) -> Memory:
        """The space's Memory, opened now if need be; LoreError when it cannot be reached."""
        if space == LOCAL:
            return self.local
        if space in self._open:
            return self._open[space]
        if space not in self._openers:
            raise NotFound(f"no space named {space!r} is configured (spaces: "
                           f"{', '.join(self.names)})")
        failed = self._failed.get(space)
        if failed and self.clock() - failed[0] < RETRY_AFTER:
            raise _Unreachable(failed[1])
        try:
            memory = self._openers[space]()
        except LoreError as exc:
            self._failed[space] = (self.clock(), str(exc))
            raise
        memory.project = self.local.project
        self._open[space] = memory
        self._failed.pop(space, None)
        return memory

    def forget(self, space: str, why: str) -> None:
        """A space that failed mid-read is closed and tried again later."""
        memory = self._open.pop(space, None)
        if memory is not None:
            try:
                memory.close()
            except Exception:  # already broken: closing it is best effort
                pass
        self._failed[space] = (self.clock(), why)

    def _each(self, fn: Callable[[Memory], object], unreachable: dict[str, str]
              ) -> Iterator[tuple[str, object]]:
        """fn on every space at once, each within `timeout`; a failure or a late answer
        names the space in `unreachable` instead. Daemon threads: a hook whose hub hangs in
        connect exits on time instead of waiting for the connect timeout at interpreter exit."""
        calls = {space: _Call(lambda space=space: fn(self.memory(space)))  # type: ignore[misc]
                 for space in self.names}
        deadline = self.clock() + self.timeout
        for space, call in calls.items():
            if not call.done.wait(max(deadline - self.clock(), 0.0)):
                why = f"no answer within {self.timeout:g} s"
                unreachable[space] = why
                if space != LOCAL:
                    self._failed[space] = (self.clock(), why)
                continue
            if call.error is None:
                yield space, call.value
            elif not isinstance(call.error, LoreError):
                raise call.error
            elif space == LOCAL:
                raise call.error  # the local file's own errors (bad input, busy) are the caller's
            else:
                unreachable[space] = str(call.error)
                if not isinstance(call.error, _Unreachable):
                    self.forget(space, str(call.error))

    def query(self, topic: str, depth: int = 1, limit: int = 10,
              include_superseded: bool = False, reinforce: bool = True) -> FusedRecall:
        """memory.Memory.query over every space, fused; reinforcement in each hit's space."""
        wide = min(limit * WIDEN, MAX_LIMIT)
        unreachable: dict[str, str] = {}
        per_space: dict[str, list[ScoredFragment]] = {}
        keyword_only = False
        for space, found in self._each(
                lambda m: m.query(topic, depth, wide, include_superseded, reinforce=False),
                unreachable):
            per_space[space] = found.fragments  # type: ignore[attr-defined]
            keyword_only = keyword_only or found.keyword_only  # type: ignore[attr-defined]
        hits = fuse(per_space, topic, limit)
        if reinforce:
            for space in {h.space for h in hits}:
                try:
                    self.memory(space).reinforce([h.fragment.id for h in hits if h.space == space])
                except LoreError as exc:  # reinforcement is best effort
                    log.warning("reinforcing in %s: %s", space, exc)
        return FusedRecall(hits, keyword_only, unreachable)

    def locate(self, fid: str) -> tuple[str, Memory, str]:
        """(space, its Memory, the full id) of the fragment `fid` (or a prefix) names: the
        local file first, then each hub space that can be reached."""
        errors: list[LoreError] = []
        for space in self.names:
            try:
                memory = self.memory(space)
                return space, memory, memory.resolve(fid)
            except LoreError as exc:
                errors.append(exc)
        found = [e for e in errors if not isinstance(e, NotFound)]
        raise found[0] if found and len(found) == len(errors) else NotFound(
            f"no fragment {fid!r} in any space ({', '.join(self.names)})")

    def explore(self, topic: str, max_depth: int = 2) -> tuple[str, TreeNode] | None:
        best = self.query(topic, depth=0, limit=1, reinforce=False)
        if not best.hits:
            return None
        hit = best.hits[0]
        memory = self.memory(hit.space)
        memory.reinforce([hit.fragment.id])
        return hit.space, memory.subtree(hit.fragment.id, max_depth)

    def close(self) -> None:
        for memory in self._open.values():
            memory.close()
        self._open.clear()


class _Unreachable(LoreError):
    """A hub space that failed a moment ago: not tried again before RETRY_AFTER."""


class _Call:
    """One space's read on a daemon thread: its value or its error, and when it is done."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.value: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(fn,), daemon=True,
                         name="lore-space").start()

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:  # handed to the caller's thread
            self.error = exc
        finally:
            self.done.set()
