"""Transcript delta → knowledge, exactly once.

watermark → parse complete lines → redact → extract (LLM) → match topics → embed → one write
transaction holding the new fragments, their edges *and* the new watermark. A crash before
the commit reprocesses the batch; a crash after it has nothing left to do. The caller holds
the per-transcript lock (worker/run.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import relevance as rel
from ..core.config import Settings
from ..core.errors import BudgetExceeded, LLMError
from ..core.faults import crash_point  # test-only, free when unset
from ..core.types import NewFragment, ScoredFragment
from ..embedding.embedder import Embedder, to_blob
from ..llm.client import LLM
from ..recall.memory import Clock, Memory, embedding_text
from ..recall.storing import near_duplicate
from ..safety.redact import redact
from ..store import HISTORY_KEY, Store
from .batches import MAX_PROMPT_CHARS, read_batch
from .extract import Extraction, extract_knowledge, strongest_basis, worth_extracting
from .patterns import failure_rows
from .transcript import Delta, delta_time, project_key
from .usefulness import Recall, apply_recall_use, recalls_in

log = logging.getLogger(__name__)
SUBAGENT_DIR = "/subagents/"  # transcript.subagent_paths: <session>/subagents/agent-*.jsonl
TOPICS_SENT = 30  # existing topic names listed in a prompt (see _topics_for)
TOPICS_IF_UNRELATED = 10
TOPIC_QUERY_CHARS = 2000  # the embedding model reads only the start of a long text anyway
TOPIC_MATCH = 0.82  # embedding similarity at which an extracted topic is an existing one
CORRECTION_MATCH = 0.55
RELATION_MATCH = 0.6


@dataclass
class IngestReport:
    batches: int = 0
    fragments: int = 0
    supersessions: int = 0
    links: int = 0
    failed: str | None = None
    skipped: str | None = None
    waiting: str | None = None  # why extraction must wait (a budget), when it must
    files: list[str] = field(default_factory=list)


@dataclass
class _Planned:
    key: int
    new: NewFragment
    parent_key: int | None = None  # index of a planned parent ...
    parent_id: str | None = None  # ... or the id of an existing one
    parent_summary: str | None = None
    fid: str | None = None
    vector: Any = None
    duplicate_of: str | None = None  # an existing fragment it repeats: not inserted


class Ingestor:
    def __init__(self, settings: Settings, llm: LLM, embedder: Embedder | None,
                 clock: Clock = time.time) -> None:
        self.settings = settings
        self.llm = llm
        self.embedder = embedder
        self.clock = clock
        # One Memory for every file this ingestor sees: a fresh one per file would load the
        # vector index again for each transcript and subagent file (0.5 s at 100K).
        self._memory: Memory | None = None

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def ingest(self, path: Path, session_id: str | None = None, retry_parked: bool = False,
               ignore_backoff: bool = False, history_end: int | None = None) -> IngestReport:
        """Processes every complete unread line of one transcript, batch by batch. With
        history_end, reads the transcript's history from before Lore's first run instead
        (`lore ingest`), under its own watermark, up to that offset."""
        report = IngestReport(files=[str(path)])
        if self._memory is None:
            self._memory = Memory(self.settings.db_path, self.embedder, self.clock)
        self._loop(self._memory, path, session_id, report, retry_parked, ignore_backoff,
                   history_end)
        return report

    def _loop(self, memory: Memory, path: Path, session_id: str | None, report: IngestReport,
              retry_parked: bool, ignore_backoff: bool, history_end: int | None) -> None:
        store = memory.writer
        key = str(path) if history_end is None else HISTORY_KEY + str(path)
        while True:
            failure = store.failure(key)
            if failure and failure["parked"] and not retry_parked:
                report.skipped = "parked"
                return
            if failure and failure["next_retry"] > self.clock() and not (ignore_backoff or retry_parked):
                report.skipped = "backing off"
                return
            offset = store.watermark(key)
            limit = None
            if history_end is not None:
                if offset >= history_end:
                    return
                limit = history_end - offset  # history ends on a line boundary
            delta, text = read_batch(path, offset, self.settings.batch_bytes, limit)
            if delta.missing:
                report.skipped = "missing"
                return
            if delta.truncated and history_end is not None:
                report.skipped = "shrank"  # not the file whose history was recorded
                return
            if delta.truncated:
                # Transcripts are append-only, so a shorter file is a different file: read it anew.
                log.warning("%s shrank below its watermark %d; reading it from the start", path, offset)
                store.set_watermark(key, 0, self.clock())
                continue
            if delta.end_offset <= offset:
                return  # no complete line yet
            memory.project = project_key(delta.cwd) if delta.cwd else memory.project
            recalls = recalls_in(path, delta.start_offset, delta.end_offset)
            if not text or not worth_extracting(delta.turns):
                # Only noise, tool traffic or small talk here: nothing is worth a call.
                with store.write():  # what recall returned is judged once, with the watermark
                    apply_recall_use(store, recalls, self.clock())
                    store.set_watermark(key, delta.end_offset, self.clock())
                continue
            if hasattr(self.llm, "project"):  # the token ledger's project column
                self.llm.project = memory.project
            try:
                extraction = extract_knowledge(self.llm, text[:MAX_PROMPT_CHARS],
                                               self._topics_for(memory, delta, text))
            except BudgetExceeded as exc:
                # Refused before any request: not the batch's fault, so no failure is
                # recorded; the watermark keeps the place until the budget allows more.
                log.info("extraction of %s waits: %s", path, exc)
                report.skipped = "budget"
                report.waiting = str(exc)
                return
            except LLMError as exc:
                attempts = store.record_failure(
                    key, offset, delta.end_offset, str(exc), self.clock(),
                    self.settings.retry_backoff_secs, self.settings.park_after)
                log.warning("extraction failed for %s @%d (attempt %d): %s", path, offset, attempts, exc)
                report.failed = str(exc)
                return
            crash_point("after-llm")
            counts = self.apply(memory, extraction, delta, key, session_id or delta.session_id,
                                recalls)
            report.batches += 1
            report.fragments += counts[0]
            report.supersessions += counts[1]
            report.links += counts[2]

    # -- turning an extraction into fragments -----------------------------------------
    def apply(self, memory: Memory, extraction: Extraction, delta: Delta, key: str,
              session_id: str | None, recalls: Sequence[Recall] = ()) -> tuple[int, int, int]:
        store = memory.writer
        when = delta_time(delta, self.clock())
        meta = {"transcript": key.removeprefix(HISTORY_KEY),
                "offsets": [delta.start_offset, delta.end_offset]}
        planned: list[_Planned] = []
        confirmed: list[str] = []  # existing knowledge the user restated in this delta
        subagent = SUBAGENT_DIR in key

        def plan(summary: str, content: str | None, depth: int, importance: str,
                 parent_key: int | None = None, parent_id: str | None = None,
                 parent_summary: str | None = None, basis: str = "observed") -> int:
            source = "subagent" if subagent else "user" if basis == "stated" else "assistant"
            summary, content = redact(summary), redact(content or summary)  # before embedding
            new = NewFragment(content=content, summary=summary, depth=depth,
                              importance=rel.importance_value(importance),
                              source_session=session_id, project=memory.project,
                              metadata=meta, created_at=when, source=source, basis=basis)
            planned.append(_Planned(len(planned), new, parent_key, parent_id, parent_summary))
            return len(planned) - 1

        topic_of: dict[str, tuple[int | None, str | None]] = {}
        for topic in extraction.topics:
            about = " — ".join(x for x in (topic.summary, topic.content) if x)
            topic_basis = strongest_basis([f for c in topic.concepts for f in c.facts])
            existing = self._match_topic(memory, topic.name, about)
            if existing is None and topic_basis == "inferred":
                log.info("not creating topic %r: it holds only inferences", topic.name)
                continue  # a guess never becomes a topic by itself
            if existing and topic_basis == "stated":
                confirmed.append(existing)
            tkey = None if existing else plan(topic.name, about, 0, topic.importance,
                                              basis=topic_basis)
            topic_of[topic.name.lower()] = (tkey, existing)
            for concept in topic.concepts:
                about = " — ".join(x for x in (concept.summary, concept.content) if x)
                found = existing and store.find_by_summary(concept.name, 1, existing)
                ckey = None if found else plan(concept.name, about, 1, concept.importance,
                                               tkey, existing, topic.name,
                                               basis=strongest_basis(concept.facts))
                for fact in concept.facts:
                    known = found and store.find_by_summary(fact.summary, 2, found)
                    if known:  # already known: re-extraction of the same fact
                        if fact.basis == "stated":
                            confirmed.append(known)
                        continue
                    fkey = plan(fact.summary, fact.content, 2, fact.importance, ckey,
                                found or None, concept.name, basis=fact.basis)
                    for detail in fact.details:
                        plan(detail.summary, detail.content, 3, detail.importance, fkey, None,
                             fact.summary, basis=detail.basis)
        corrections = [(c, self._find_old(memory, c.old)) for c in extraction.corrections]
        self._embed(planned)
        self._near_duplicates(memory, planned, confirmed)
        # Everything the write below needs from the model or a search, got before it starts:
        # no write lock is held while embedding.
        names = [r.source for r in extraction.relationships] + [
            r.target for r in extraction.relationships]
        vectors = self._vectors([c.new for c, old in corrections if old is not None] + names
                                + [f.what for f in extraction.failures])
        searched = {name: memory.search(name, limit=1).fragments for name in set(names)}
        corrected = {c.new: redact(c.new) for c, old in corrections if old is not None}
        failures = failure_rows(extraction.failures, vectors, session_id, memory.project, when)
        now = self.clock()
        supersessions = links = 0
        with store.write():
            for item in planned:
                if item.duplicate_of:
                    continue
                parent = item.parent_id if item.parent_key is None else planned[item.parent_key].fid
                item.fid = store.insert(item.new, now, None if item.vector is None
                                        else to_blob(item.vector), parent)
                crash_point("after-insert")
            links += self._temporal_edges(store, planned, now)
            for correction, old in corrections:
                if old is None:
                    continue
                vector = vectors.get(correction.new)
                new_id = self._best_planned(planned, correction.new, old.depth, vector)
                if new_id is None:
                    new_id = store.insert(
                        NewFragment(content=(text := corrected[correction.new]), summary=text,
                                    depth=old.depth, importance=old.importance,
                                    source_session=session_id, project=memory.project,
                                    metadata=meta, created_at=when,
                                    source="subagent" if subagent else "user", basis="stated"),
                        now, None if vector is None else to_blob(vector), old.parent_id)
                    planned.append(_Planned(len(planned), NewFragment("", "", 0), fid=new_id))
                store.supersede(old.id, new_id, now)
                supersessions += 1
            for relation in extraction.relationships:
                a, b = (self._resolve_name(memory, planned, name, vectors.get(name),
                                           searched[name])
                        for name in (relation.source, relation.target))
                if a and b and a != b:
                    store.link(a, b, "associative", 0.6, now)
                    links += 1
            if confirmed:
                store.confirm(confirmed, now)
            if failures:  # the rule of three's evidence (patterns.py)
                store.add_failure_records(failures)
            apply_recall_use(store, list(recalls), now)  # implicit usefulness (usefulness.py)
            crash_point("before-watermark")
            store.set_watermark(key, delta.end_offset, now)
            store.clear_failure(key)
        crash_point("after-commit")
        return sum(1 for p in planned if p.new.summary and not p.duplicate_of), supersessions, links

    @staticmethod
    def _near_duplicates(memory: Memory, planned: list[_Planned], confirmed: list[str]) -> None:
        """A planned fragment that repeats a live sibling under its existing parent (the same
        check as store_memory's, storing.near_duplicate) is not added: the sibling is
        reinforced, confirmed when the user stated it again, and takes the planned children."""
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
                    if item.new.basis == "stated":
                        confirmed.append(same)
        memory.reinforce(list(dict.fromkeys(found.values())))

    @staticmethod
    def _topics_for(memory: Memory, delta: Delta, text: str) -> list[str]:
        """The existing topic names the prompt lists: all of them when few, else the
        TOPICS_SENT closest to what the user asked in this slice (by embedding). A topic left
        out is still found when the answer names it (_match_topic)."""
        names = memory.writer.topic_names(limit=TOPICS_SENT + 1)
        if len(names) <= TOPICS_SENT or not memory.embedder_ready():
            return names[:TOPICS_SENT]
        asked = " ".join(t.text for t in delta.turns if t.role == "user")
        found = memory.search((asked or text)[:TOPIC_QUERY_CHARS], limit=TOPICS_SENT, depth=0,
                              mode="vector").fragments
        # Nothing related at all: a few of the most relevant names keep the naming consistent.
        return [s.fragment.summary for s in found] or names[:TOPICS_IF_UNRELATED]

    def _match_topic(self, memory: Memory, name: str, about: str) -> str | None:
        store = memory.writer
        by_name = store.find_by_summary(name, depth=0)
        if by_name:
            return by_name
        if not memory.embedder_ready():
            return None
        best = memory.search(f"{name}: {about}", limit=1, depth=0, mode="vector").fragments
        if best and best[0].similarity >= TOPIC_MATCH:
            return best[0].fragment.id
        return None

    def _find_old(self, memory: Memory, text: str):  # noqa: ANN202 - Fragment | None
        """The fragment a correction revises: the best live match, if close enough."""
        found = memory.search(text, limit=1).fragments
        if not found:
            return None
        top = found[0]
        if top.similarity >= CORRECTION_MATCH or (top.similarity == 0.0 and top.score > 0.5):
            return top.fragment
        return None

    @staticmethod
    def _best_planned(planned: list[_Planned], text: str, depth: int, vector: Any | None
                      ) -> str | None:
        best, best_sim = None, RELATION_MATCH
        for item in planned:
            if item.new.depth != depth or item.fid is None:
                continue
            if item.new.summary.strip().lower() == text.strip().lower():
                return item.fid
            if vector is not None and item.vector is not None:
                sim = float(item.vector @ vector)
                if sim > best_sim:
                    best, best_sim = item.fid, sim
        return best

    def _resolve_name(self, memory: Memory, planned: list[_Planned], text: str,
                      vector: Any | None, found: list[ScoredFragment]) -> str | None:
        """The fragment a relationship names: a new or existing one by name, then the closest
        new one, then `found`, the best existing match searched before the write began."""
        lowered = text.strip().lower()
        for item in planned:
            if item.fid and item.new.summary.strip().lower() == lowered:
                return item.fid
        existing = memory.writer.find_by_summary(text)
        if existing:
            return existing
        for depth in (1, 2, 0):
            hit = self._best_planned(planned, text, depth, vector)
            if hit:
                return hit
        if found and found[0].similarity >= RELATION_MATCH:
            return found[0].fragment.id
        return None

    @staticmethod
    def _temporal_edges(store: Store, planned: list[_Planned], now: float) -> int:
        """Sequential siblings are chained in the order they came, and the first newcomer
        under an existing parent follows that parent's latest earlier child."""
        new_by_parent: dict[str, set[str]] = {}
        for item in planned:
            parent = item.parent_id if item.parent_key is None else planned[item.parent_key].fid
            if parent and item.fid and item.new.depth > 0:
                new_by_parent.setdefault(parent, set()).add(item.fid)
        count = 0
        for parent, newcomers in new_by_parent.items():
            siblings = store.child_ids(parent)  # oldest first
            first = min(siblings.index(f) for f in newcomers if f in siblings)
            chain = siblings[max(first - 1, 0):]
            for earlier, later in zip(chain, chain[1:]):
                store.link(earlier, later, "temporal", 1.0, now)
                count += 1
        return count

    def _vectors(self, texts: list[str]) -> dict[str, Any]:
        """One batch for all of them; empty when there is no model (embedded later)."""
        unique = list(dict.fromkeys(texts))
        if not unique or self.embedder is None or not getattr(self.embedder, "available", True):
            return {}
        try:
            return dict(zip(unique, self.embedder.embed(unique)))
        except Exception as exc:  # no vectors: those fragments are embedded later
            log.warning("embedding failed: %s", exc)
            return {}

    def _embed(self, planned: list[_Planned]) -> None:
        if not planned or self.embedder is None or not getattr(self.embedder, "available", True):
            return
        texts = [embedding_text(p.new.summary, p.new.content, p.parent_summary) for p in planned]
        try:
            vectors = self.embedder.embed(texts)
        except Exception as exc:
            log.warning("embedding failed, stored without vectors: %s", exc)
            return
        for item, vector in zip(planned, vectors):
            item.vector = vector

