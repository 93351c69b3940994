"""The per-prompt hook's selection (lore_plugin/recall/prompt_recall.py), scored as issue 30
asks: coverage, precision and the unrelated rate, before and after the descent to answers.

    python bench/bench_prompt_recall.py [--limit-conversations N] [--json PATH]

Data and databases are bench_recall.py's (LoCoMo, the paraphrase set and the peer corpus, same
cache). Every question is asked twice, as a prompt:
- against its own memory ("related"): an injection answers when it holds a gold item, the
  fragment that answers (a LoCoMo evidence turn, a paraphrase target fact, a peer note), never
  merely a heading above it;
- against a memory that cannot answer it ("unrelated": LoCoMo conversation i's questions
  against conversation i+1, the paraphrase queries against the peer corpus, the peer's against
  LoCoMo conversation 0): any injection there is a wrong one.
Coverage = related prompts whose injection answers / related prompts; precision = injections
that answer / all injections (related and unrelated prompts together); unrelated = share of
unrelated prompts with any injection. Every injection goes through compose(), so the
600-character budget applies as in the hook. "before" is the selection as it was until issue
24 (hybrid search's candidates at depth 1 and below over a cosine, headings included, no
paths); "after" is prompt_recall's, with its constants varied around the chosen ones.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import (  # noqa: E402
    CACHE,
    DEFAULT_LOCOMO,
    DEFAULT_PEER,
    CachedEmbedder,
    Corpus,
    build_database,
    load_locomo,
    load_paraphrase,
    load_peer,
)
from common import percentile, table, write_json  # noqa: E402

from lore_plugin.embedding.embedder import LocalEmbedder  # noqa: E402
from lore_plugin.recall import prompt_recall as pr  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from lore_plugin.recall.render import plural  # noqa: E402
from lore_plugin.recall.terms import keyword_terms  # noqa: E402

BEFORE_COSINES = (0.45, 0.50, 0.55)
AFTER_COSINES = (0.45, 0.50, 0.55)
AFTER_CHILD = (0.40, 1.0)
AFTER_MOST = (1, 2, 4)


class Tally:
    def __init__(self) -> None:
        self.related = self.unrelated = self.answered = self.injected = 0
        self.wrong = 0  # injections for unrelated prompts

    def add(self, related: bool, ids: list[str], gold: frozenset[str]) -> None:
        if related:
            self.related += 1
        else:
            self.unrelated += 1
        if not ids:
            return
        self.injected += 1
        if related and gold & set(ids):
            self.answered += 1
        if not related:
            self.wrong += 1

    def row(self) -> dict[str, float]:
        return {"coverage": round(self.answered / self.related, 3) if self.related else 0.0,
                "precision": round(self.answered / self.injected, 3) if self.injected else 0.0,
                "unrelated": round(self.wrong / self.unrelated, 3) if self.unrelated else 0.0,
                "injections": self.injected}


def old_words(memory: Memory, text: str) -> list[Any]:
    """The fallback until issue 24: FTS5 candidates at depth 1 and below, headings included,
    judged on their own text."""
    terms = keyword_terms(text[:pr.MAX_PROMPT])
    expr = pr.fts_expression(text[:pr.MAX_PROMPT])
    if expr is None or len(terms) < pr.MIN_TERMS:
        return []
    ids = [f.id for f, _ in memory.reader.keyword_search(expr, pr.CANDIDATES)
           if f.depth >= 1 and not f.superseded_by]
    full = memory.reader.get_many(ids)
    return [full[i] for i in ids if i in full and pr._words_hold(terms, full[i])]


def ask(memory: Memory, text: str, related: bool, gold: frozenset[str],
        tallies: dict[str, Tally], timings: list[float]) -> None:
    found = memory.search(text[:pr.MAX_PROMPT], limit=pr.CANDIDATES)
    hybrid = [(s.fragment, s.similarity) for s in found.fragments if s.fragment.depth >= 1]
    for t in BEFORE_COSINES:
        _, ids = pr.compose([f for f, c in hybrid if c >= t])
        tallies.setdefault(f"before: cosine ≥ {t:.2f}", Tally()).add(related, ids, gold)
    start = time.perf_counter()
    answers = pr.answers_by_cosine(memory, text, set()) or []
    _, ids = pr.compose(pr.pick(answers), store=memory.reader)
    timings.append(time.perf_counter() - start)
    tallies.setdefault("after: chosen", Tally()).add(related, ids, gold)
    where = pr.paths(memory.reader, [a[0] for a in answers])  # read once for every rule
    for t in AFTER_COSINES:
        for child in AFTER_CHILD:
            for most in AFTER_MOST:
                _, ids = pr.compose(pr.pick(answers, t, min(child, t), most), where=where)
                name = (f"after: cosine ≥ {t:.2f}" + (f", below a match ≥ {child:.2f}"
                                                      if child < t else "")
                        + ", " + plural(most, "answer"))
                tallies.setdefault(name, Tally()).add(related, ids, gold)
    _, ids = pr.compose(old_words(memory, text))
    tallies.setdefault("before: words", Tally()).add(related, ids, gold)
    _, ids = pr.compose(pr.strong_by_words(memory.reader, text, set()), store=memory.reader)
    tallies.setdefault("after: words", Tally()).add(related, ids, gold)


def run(pairs: list[tuple[Corpus, Path, dict[str, str], Corpus | None, Path | None]],
        model: LocalEmbedder, folder: Path) -> tuple[dict[str, Tally], list[float]]:
    """pairs: (corpus, its database, id → key, the corpus whose memory gets its questions as
    unrelated prompts, that memory's database)."""
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    tallies: dict[str, Tally] = {}
    timings: list[float] = []
    for corpus, db_path, ids, other, other_db in pairs:
        by_key = {key: fid for fid, key in ids.items()}
        memory = Memory(db_path, embedder, clock=lambda c=corpus: c.now, tz=UTC)
        try:
            for q in corpus.questions:
                gold = frozenset(by_key[k] for k in q.gold if k in by_key)
                ask(memory, q.text, True, gold, tallies, timings)
        finally:
            memory.close()
        if other is not None and other_db is not None:
            memory = Memory(other_db, embedder, clock=lambda c=other: c.now, tz=UTC)
            try:
                for q in corpus.questions:
                    ask(memory, q.text, False, frozenset(), tallies, timings)
            finally:
                memory.close()
    return tallies, timings


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    model = LocalEmbedder(CACHE / "models")
    locomo = load_locomo(DEFAULT_LOCOMO, args.limit_conversations)
    peer, para = load_peer(DEFAULT_PEER), load_paraphrase()
    lfolder, pfolder, qfolder = (CACHE / "recall-locomo", CACHE / "recall-peer",
                                 CACHE / "recall-paraphrase")
    built = {}
    for i, c in enumerate(locomo):
        built[i] = build_database(c, lfolder, CachedEmbedder(model, lfolder / "embeddings.sqlite"))
    peer_db, peer_ids = build_database(peer, pfolder, CachedEmbedder(model, pfolder / "embeddings.sqlite"))
    para_db, para_ids = build_database(para, qfolder, CachedEmbedder(model, qfolder / "embeddings.sqlite"))
    shifted = [(c, *built[i], locomo[(i + 1) % len(locomo)] if len(locomo) > 1 else None,
                built[(i + 1) % len(locomo)][0] if len(locomo) > 1 else None)
               for i, c in enumerate(locomo)]
    results: dict[str, Any] = {}
    speed: dict[str, Any] = {}
    for name, pairs, folder in (
            ("paraphrase", [(para, para_db, para_ids, peer, peer_db)], qfolder),
            ("peer", [(peer, peer_db, peer_ids, locomo[0], built[0][0])], pfolder),
            ("locomo", shifted, lfolder)):
        tallies, timings = run(pairs, model, folder)
        results[name] = {k: t.row() for k, t in tallies.items()}
        speed[name] = {"p50_ms": round(percentile(timings, 50) * 1000, 1),
                       "p95_ms": round(percentile(timings, 95) * 1000, 1)}
        print(table(f"Prompt recall on {name} (search and selection: p50 "
                    f"{speed[name]['p50_ms']} ms, p95 {speed[name]['p95_ms']} ms)",
                    ["selection", "coverage", "precision", "unrelated", "injections"],
                    [[k, r["coverage"], r["precision"], r["unrelated"], r["injections"]]
                     for k, r in results[name].items()]), flush=True)
    chosen = {"min_cosine": pr.MIN_COSINE, "min_child_cosine": pr.MIN_CHILD_COSINE,
              "most": pr.MOST, "min_terms": pr.MIN_TERMS, "min_coverage": pr.MIN_COVERAGE}
    write_json(args.json, "prompt_recall", {"results": results, "speed": speed,
                                            "chosen": chosen})
    return results


if __name__ == "__main__":
    main()
