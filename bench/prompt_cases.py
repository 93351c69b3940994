"""The per-prompt benchmark's cases: every question asked as a prompt of its own memory
(related) and of one that cannot answer it (unrelated), with the candidate answers
prompt_recall.candidates() gives and their evidence, and which of them answer. Rules are then
judged on the cases without searching again (bench_prompt_recall.py).

The split into a tuning half and a held-out half is fixed by SPLIT_SEED: LoCoMo by whole
conversation (a rule tuned on some people's chat is held out on other people's), the
paraphrase and peer sets by question. A question's unrelated asking goes with its half."""

from __future__ import annotations

import pickle
import random
from dataclasses import dataclass, field, replace
from datetime import UTC
from pathlib import Path

import blind_cues
from bench_recall import CachedEmbedder, Corpus, Question

from lore_plugin.core.types import Fragment
from lore_plugin.recall import prompt_recall as pr
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.prompt_evidence import Candidate
from lore_plugin.recall.storing import store_knowledge

SPLIT_SEED = 30  # issue 30
POOL = 20  # search hits asked for in `wide`: would more candidates help?
POOL_CHILDREN = 8  # children of each matched heading in `wide`
POOL_RARE = 10  # hits for the prompt's rarest words in `wide`
HALVES = ("tuning", "held-out")


@dataclass
class Case:
    dataset: str
    question: str
    related: bool
    half: str
    gold: frozenset[str]  # fragment ids that answer (empty when unrelated)
    found: list[Candidate]  # the hook's candidates (prompt_recall.gather: replies included)
    words: list[Fragment]  # the keyword fallback's choice (no server answering)
    where: dict[str, str]  # the paths of everything above, as the hook shows them
    wide: list[Candidate] = field(default_factory=list)  # the same from the pool (POOL_*)


def select(pool: list[Candidate], limit: int, children: int, rare: int) -> list[Candidate]:
    """The candidates prompt_candidates.candidates(limit, children, rare_hits) would give,
    read from a wider pool: search's first `limit` hits with their first `children` children,
    then the first `rare` rare-word hits that search did not bring (placed after search's)."""
    out = []
    for c in pool:
        if c.rank < limit and c.child < children:
            out.append(c if c.rare < rare else replace(c, rare=-1))
        elif 0 <= c.rare < rare:
            out.append(replace(c, rank=limit + c.rare, child=-1, below=False, branch=0.0))
    return sorted(out, key=lambda c: (c.rank, c.child))


def split(keys: list[str]) -> dict[str, str]:
    """key -> half: a seeded shuffle, the first half (rounded down) for tuning."""
    order = sorted(keys)
    random.Random(SPLIT_SEED).shuffle(order)
    cut = len(order) // 2
    return {k: HALVES[0] if i < cut else HALVES[1] for i, k in enumerate(order)}


def ask_all(dataset: str, corpus: Corpus, db_path: Path, ids: dict[str, str],
            other: Corpus | None, other_db: Path | None, halves: dict[str, str],
            embedder: CachedEmbedder, timings: list[float], project: str | None = None,
            unrelated: list[Question] | None = None,
            asked_from: dict[str, str | None] | None = None) -> list[Case]:
    """`halves`: question text (or corpus name, for LoCoMo) -> half. `project`: the session's
    project, as the hook running in that project sets it on its memory. `unrelated`: prompts
    of the corpus's own that no note answers, asked of its memory (a set that brings its own
    instead of another memory's questions). `asked_from`: prompt -> the project of the session
    asking it, set on the memory before each prompt as the memory service does for each
    session's call (engine.Service), `project` for a prompt it does not name."""
    import time

    by_key = {key: fid for fid, key in ids.items()}
    cases: list[Case] = []
    asked = [(corpus.questions, corpus, db_path, True)]
    if other is not None and other_db is not None:
        asked.append((corpus.questions, other, other_db, False))
    if unrelated:
        asked.append((unrelated, corpus, db_path, False))
    for questions, memory_of, path, related in asked:
        memory = Memory(path, embedder, clock=lambda c=memory_of: c.now, project=project, tz=UTC)
        try:
            for q in questions:
                if asked_from is not None:
                    memory.project = asked_from.get(q.text, project)
                gold = frozenset(by_key[k] for k in q.gold if k in by_key) if related \
                    else frozenset()
                start = time.perf_counter()
                found = pr.gather(memory, q.text, set()) or []
                timings.append(time.perf_counter() - start)
                wide = pr.candidates(memory, q.text, set(), limit=POOL, children=POOL_CHILDREN,
                                    rare_hits=POOL_RARE) or []
                words = pr.strong_by_words(memory.reader, q.text, set())
                where = {c.fragment.id: c.path for c in wide + found}
                where.update(pr.paths(memory.reader, [f for f in words if f.id not in where]))
                half = halves.get(corpus.name, halves.get(q.text, HALVES[0]))
                cases.append(Case(dataset, q.text, related, half, gold, found, words, where,
                                  wide))
        finally:
            memory.close()
    return cases


def store_placed(corpus: Corpus, db_path: Path, embedder: CachedEmbedder,
                 project: str | None = None,
                 projects: dict[str, str | None] | None = None) -> dict[str, str]:
    """A fresh memory holding the corpus's deepest notes stored as a new user stores them:
    store_memory with content and summary only (storing.store_knowledge, as the tool calls
    it), oldest first, each on its own day, so that Lore's placement finds or makes the topic
    and concept above it. `project`: the MCP server's project (memory.project, as a session
    started in a project directory sets it), so that placement puts the notes under that
    project's topic instead of "Loose knowledge"; `projects`: note key -> the project it is
    stored in, when the notes come from sessions in several (set on the memory before each
    store, as the memory service does for each session's call). Returns fragment id -> note key (a note
    stored as a repeat of an earlier one keeps the earlier's)."""
    for old in db_path.parent.glob(db_path.name + "*"):
        old.unlink()
    deepest = max(n.depth for n in corpus.nodes)
    notes = sorted((n for n in corpus.nodes if n.depth == deepest), key=lambda n: n.created_at)
    day = [corpus.now]
    memory = Memory(db_path, embedder, clock=lambda: day[0], project=project, tz=UTC)
    ids: dict[str, str] = {}
    try:
        for note in notes:
            day[0] = note.created_at
            if projects is not None:
                memory.project = projects.get(note.key, project)
            ids.setdefault(store_knowledge(memory, note.content, note.summary,
                                           cues=blind_cues.of(corpus.name, note.key)
                                           ).fragment.id, note.key)
        fill_cue_vectors(memory.writer, embedder)  # --cues: as the memory service does
    finally:
        memory.close()
    return ids


def save(cases: list[Case], path: Path) -> None:
    path.write_bytes(pickle.dumps(cases))


def load(path: Path) -> list[Case]:
    cases: list[Case] = pickle.loads(path.read_bytes())
    return cases
