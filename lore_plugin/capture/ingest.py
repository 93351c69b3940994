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

from ..core import relevance as rel
from ..core.config import Settings
from ..core.cues import clean_cues
from ..core.errors import AnswerTruncated, BudgetExceeded, LLMError, LLMTransient
from ..core.faults import crash_point  # test-only, free when unset
from ..core.types import NewFragment
from ..embedding.embedder import Embedder, to_blob
from ..llm.client import LLM
from ..recall.memory import Clock, Memory
from ..safety.redact import redact
from ..store import HISTORY_KEY, Store
from .batches import MAX_PROMPT_CHARS, context_before, read_batch
from .extract import Extraction, extract_knowledge, strongest_basis, worth_extracting
from .known import (
    Known,
    correction_target,
    flag_for_review,
    journal_supersession,
    known_facts,
    match_topic,
    may_supersede,
    topics_for,
)
from .linking import Planned as _Planned
from .linking import embed_planned, planned_match, resolve_name, temporal_edges, vectors_for
from .patterns import failure_rows
from .project_keys import adopt_remote_key
from .repeats import Repeats
from .routing import LOCAL, Routes, transcript_space
from .team_write import TeamSpaceDown, TeamWriter
from .transcript import Delta, delta_time
from .usefulness import Recall, apply_recall_use, recalls_in

log = logging.getLogger(__name__)
SUBAGENT_DIR = "/subagents/"  # transcript.subagent_paths: <session>/subagents/agent-*.jsonl
NO_DIGEST = Known()
MIN_RETRY_BYTES = 2048  # a cut-off answer is asked again on half the slice, down to this


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

    def add(self, counts: tuple[int, int, int]) -> None:
        self.batches += 1
        self.fragments, self.supersessions, self.links = (
            self.fragments + counts[0], self.supersessions + counts[1], self.links + counts[2])


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
        self.routes = Routes(settings, embedder, clock)  # the hub spaces written to
        self.team = TeamWriter(settings, self.routes)  # issue 29: an opted-in repo's team part

    def close(self) -> None:
        self.routes.close()
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def ingest(self, path: Path, session_id: str | None = None, retry_parked: bool = False,
               ignore_backoff: bool = False, history_end: int | None = None) -> IngestReport:
        """Processes every complete unread line of one transcript, batch by batch (with history_end,
        its history from before Lore's first run up to that offset, `lore ingest`, own watermark)."""
        report = IngestReport(files=[str(path)])
        if self._memory is None:
            self._memory = Memory(self.settings.db_path, self.embedder, self.clock)
        space = transcript_space(self.settings, path) if history_end is None else LOCAL
        if space == LOCAL:
            self._loop(self._memory, path, session_id, report, retry_parked, ignore_backoff,
                       history_end)
        else:
            why = self.routes.ingest_into(space, str(path), self._memory, lambda m: (
                self._loop(m, path, session_id, report, retry_parked, ignore_backoff, None)))
            report.skipped = why or report.skipped
        self.routes.fill_cue_vectors()  # issue 30: what the hub writes above left due
        return report

    def _loop(self, memory: Memory, path: Path, session_id: str | None, report: IngestReport,
              retry_parked: bool, ignore_backoff: bool, history_end: int | None) -> None:
        store = memory.writer
        key = str(path) if history_end is None else HISTORY_KEY + str(path)
        if retry_parked:
            store.unpark(key, self.clock())
        if not self._retry_ranges(memory, path, key, session_id, report):
            return
        budget = self.settings.batch_bytes  # less while a cut-off answer is asked again
        while True:
            offset = store.watermark(key)
            failure = store.failure_at(key, offset)
            if failure and failure["next_retry"] > self.clock() and not (ignore_backoff or retry_parked):
                report.skipped = "backing off"
                return
            limit = None
            if history_end is not None:
                if offset >= history_end:
                    return
                limit = history_end - offset  # history ends on a line boundary
            delta, text = read_batch(path, offset, budget, limit)
            if delta.missing:
                report.skipped = "missing"
                return
            if delta.truncated and history_end is not None:
                report.skipped = "shrank"  # not the file whose history was recorded
                return
            if delta.truncated:
                # Transcripts are append-only, so a shorter file is a different file: read it anew.
                log.warning("%s shrank below its watermark %d; reading it from the start", path, offset)
                with store.write():
                    store.clear_failure(key)  # its ranges were of the other file
                    store.set_watermark(key, 0, self.clock())
                continue
            if delta.end_offset <= offset:
                return  # no complete line yet
            if delta.cwd:  # rows kept under the repository's path move to its remote key
                memory.project = adopt_remote_key(store, delta.cwd)
            recalls = recalls_in(path, delta.start_offset, delta.end_offset)
            if not text or not worth_extracting(delta.turns):
                # Only noise, tool traffic or small talk here: nothing is worth a call.
                with store.write():  # what recall returned is judged once, with the watermark
                    apply_recall_use(store, recalls, self.clock())
                    store.set_watermark(key, delta.end_offset, self.clock())
                continue
            try:
                extraction, digest = self._extract(memory, path, delta, text)
            except AnswerTruncated as exc:
                smaller = (delta.end_offset - offset) // 2
                if smaller >= MIN_RETRY_BYTES and delta.lines > 1:
                    log.info("%s @%d: %s; asking again with %d bytes", path, offset, exc, smaller)
                    budget = smaller
                    continue
                if self._failed(store, key, path, delta, exc, report):
                    continue
                return
            except LLMError as exc:  # BudgetExceeded and LLMTransient among them
                if self._failed(store, key, path, delta, exc, report):
                    continue  # parked: the slices after it go on
                return
            crash_point("after-llm")
            budget = self.settings.batch_bytes
            try:  # issue 29: the team's part first, exactly once (capture/team_write.py)
                extraction = self.team.share(memory, extraction, delta, key,
                                             session_id or delta.session_id, self.apply, digest)
            except TeamSpaceDown as exc:
                report.skipped = str(exc)
                return
            counts = self.apply(memory, extraction, delta, key, session_id or delta.session_id,
                                recalls, digest)
            report.add(counts)

    def _extract(self, memory: Memory, path: Path, delta: Delta, text: str
                 ) -> tuple[Extraction, Known]:
        """One call: the slice, with the end of the one before it, the known facts most
        related to it (with ids to correct), the project and the date."""
        if hasattr(self.llm, "project"):  # the token ledger's project column
            self.llm.project = memory.project
        asked = " ".join(t.text for t in delta.turns if t.role == "user") or text
        digest = self.team.known(memory, delta, asked, known_facts(memory, asked))
        day = time.strftime("%Y-%m-%d", time.gmtime(delta_time(delta, self.clock())))
        extraction = extract_knowledge(
            self.llm, text[:MAX_PROMPT_CHARS], topics_for(memory, delta, text),
            known=digest.lines, context=context_before(path, delta.start_offset),
            project=memory.project, date=day)
        return extraction, digest

    def _failed(self, store: Store, key: str, path: Path, delta: Delta, exc: LLMError,
                report: IngestReport) -> bool:
        """Records a failed batch, or a budget or transient wait; True when the batch was
        parked and the watermark moved past it, so that the rest of the transcript goes on."""
        report.failed = str(exc)
        if isinstance(exc, BudgetExceeded | LLMTransient):
            # Refused before any request, or the API's trouble, not the batch's: no attempt
            # is counted; the watermark keeps the place until the LLM can answer again.
            log.info("extraction of %s waits: %s", path, exc)
            report.failed, report.waiting = None, str(exc)
            report.skipped = "budget" if isinstance(exc, BudgetExceeded) else "transient"
            if isinstance(exc, LLMTransient):
                store.defer(key, delta.start_offset, delta.end_offset, str(exc), self.clock(),
                            self.settings.retry_backoff_secs)
            return False
        attempts = store.record_failure(
            key, delta.start_offset, delta.end_offset, str(exc), self.clock(),
            self.settings.retry_backoff_secs, self.settings.park_after)
        log.warning("extraction failed for %s @%d (attempt %d): %s", path, delta.start_offset,
                    attempts, exc)
        if attempts < self.settings.park_after:
            return False
        store.park_range(key, delta.start_offset, delta.end_offset, self.clock())
        log.warning("parked %s bytes %d-%d; `lore retry-parked` tries it again", path,
                    delta.start_offset, delta.end_offset)
        return True

    def _retry_ranges(self, memory: Memory, path: Path, key: str, session_id: str | None,
                      report: IngestReport) -> bool:
        """Parked ranges a person asked to retry (`lore retry-parked`, the viewer), before
        the unread tail; False when the LLM must wait."""
        store = memory.writer
        for start, end in store.queued_ranges(key):
            while start < end:
                delta, text = read_batch(path, start, self.settings.batch_bytes, end - start)
                if delta.missing or delta.truncated or delta.end_offset <= start:
                    break
                if text and worth_extracting(delta.turns):
                    try:
                        extraction, digest = self._extract(memory, path, delta, text)
                    except LLMError as exc:
                        if isinstance(exc, BudgetExceeded | LLMTransient):
                            self._failed(store, key, path, delta, exc, report)
                            return False
                        store.repark(key, start, str(exc))
                        report.failed = str(exc)
                        break
                    report.add(self.apply(memory, extraction, delta, key,
                                          session_id or delta.session_id, (), digest, start))
                else:
                    store.shrink_range(key, start, delta.end_offset)
                start = delta.end_offset
        return True

    # -- turning an extraction into fragments -----------------------------------------
    def apply(self, memory: Memory, extraction: Extraction, delta: Delta, key: str,
              session_id: str | None, recalls: Sequence[Recall] = (), digest: Known = NO_DIGEST,
              range_start: int | None = None, author: str | None = None) -> tuple[int, int, int]:
        """One extraction written in one transaction with its place: the watermark moves
        past the slice, or with range_start (a parked range retried) that range shrinks."""
        store = memory.writer
        when = delta_time(delta, self.clock())
        meta = {"transcript": key.removeprefix(HISTORY_KEY),
                "offsets": [delta.start_offset, delta.end_offset],
                **({"author": author} if author else {})}  # issue 29: a team row's member
        planned: list[_Planned] = []
        confirmed: list[str] = []  # existing knowledge the user restated in this delta
        repeats = Repeats()  # existing knowledge extracted again: its cues join the held ones
        subagent = SUBAGENT_DIR in key

        def plan(summary: str, content: str | None, depth: int, importance: str,
                 parent_key: int | None = None, parent_id: str | None = None,
                 parent_summary: str | None = None, basis: str = "observed", cues=()) -> int:
            source = "subagent" if subagent else "user" if basis == "stated" else "assistant"
            summary, content = redact(summary), redact(content or summary)  # before embedding
            new = NewFragment(content=content, summary=summary, depth=depth,
                              importance=rel.importance_value(importance),
                              source_session=session_id, project=memory.project,
                              metadata=meta, created_at=when, source=source, basis=basis,
                              cues=clean_cues(cues))  # redacted by the store's insert
            planned.append(_Planned(len(planned), new, parent_key, parent_id, parent_summary))
            return len(planned) - 1

        topic_of: dict[str, tuple[int | None, str | None]] = {}
        for topic in extraction.topics:
            about = " — ".join(x for x in (topic.summary, topic.content) if x)
            topic_basis = strongest_basis([f for c in topic.concepts for f in c.facts])
            existing = match_topic(memory, topic.name, about)
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
                        repeats.add(known, clean_cues(fact.cues))
                        if fact.basis == "stated":
                            confirmed.append(known)
                        continue
                    fkey = plan(fact.summary, fact.content, 2, fact.importance, ckey,
                                found or None, concept.name, basis=fact.basis, cues=fact.cues)
                    for detail in fact.details:
                        plan(detail.summary, detail.content, 3, detail.importance, fkey, None,
                             fact.summary, basis=detail.basis)
        corrections = [(c, correction_target(memory, c, digest)) for c in extraction.corrections]
        for correction, old in corrections:  # no target: the new fact is new knowledge
            tkey, tid = topic_of.get(correction.topic.lower(), (None, None))
            if old is None and not any(p.new.summary.lower() == correction.new.lower()
                                       for p in planned) and (tkey is not None or tid):
                plan(correction.new, None, 1, "medium", tkey, tid, correction.topic,
                     basis="inferred")
        embed_planned(self.embedder, planned)
        repeats.near_duplicates(memory, planned, confirmed)
        # Everything the write below needs from the model or a search, got before it starts:
        # no write lock is held while embedding.
        names = [r.source for r in extraction.relationships] + [
            r.target for r in extraction.relationships]
        vectors = vectors_for(self.embedder, [c.new for c, old in corrections if old is not None] + names
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
            links += temporal_edges(store, planned, now)
            for correction, old in corrections:
                if old is None:
                    continue
                vector = vectors.get(correction.new)
                match = planned_match(planned, correction.new, old.depth, vector)
                basis = (match.new.basis if match else None) or "inferred"
                if match is None:
                    new_id = store.insert(
                        NewFragment(content=(text := corrected[correction.new]), summary=text,
                                    depth=old.depth, importance=old.importance,
                                    source_session=session_id, project=memory.project,
                                    metadata=meta, created_at=when, basis=basis,
                                    source="subagent" if subagent else "assistant"),
                        now, None if vector is None else to_blob(vector), old.parent_id)
                    planned.append(_Planned(len(planned), NewFragment("", "", 0), fid=new_id))
                else:
                    new_id = match.fid or ""
                if not may_supersede(old, basis, subagent):
                    flag_for_review(store, new_id, old, now)
                    continue
                store.supersede(old.id, new_id, now)
                journal_supersession(store, old, new_id, correction.new, now, "extraction")
                supersessions += 1
            for relation in extraction.relationships:
                a, b = (resolve_name(memory, planned, name, vectors.get(name), searched[name])
                        for name in (relation.source, relation.target))
                if a and b and a != b:
                    store.link(a, b, "associative", 0.6, now)
                    links += 1
            if confirmed:
                store.confirm(confirmed, now)
            repeats.join_cues(store)
            # The rule of three's evidence (patterns.py). A hub space keeps no failure records
            # (its cycle skips that phase), so they are dropped there, not written elsewhere:
            # outside this transaction they could be counted twice after a retry.
            if failures and store.records_failures:
                store.add_failure_records(failures)
            apply_recall_use(store, list(recalls), now)  # implicit usefulness (usefulness.py)
            crash_point("before-watermark")
            if range_start is None:
                store.set_watermark(key, delta.end_offset, now)
                store.clear_failure_from(key, delta.start_offset)
            else:
                store.shrink_range(key, range_start, delta.end_offset)
        crash_point("after-commit")
        return sum(1 for p in planned if p.new.summary and not p.duplicate_of), supersessions, links
