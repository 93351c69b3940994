"""How the per-prompt recall threshold was chosen: precision and injection rate of the
UserPromptSubmit hook's selection (lore_plugin/recall/prompt_recall.py) on the retrieval benchmarks.

    python bench/bench_prompt_recall.py [--limit-conversations N] [--json PATH]

Data and databases are bench_recall.py's (LoCoMo and the peer corpus, same cache). Every
question is asked twice, as a prompt:
- against its own memory ("related"): an injection is correct when it holds a gold item;
- against a memory that cannot answer it ("unrelated": LoCoMo conversation i's questions
  against conversation i+1, the peer's questions against LoCoMo conversation 0): any
  injection there is a wrong one.
Precision = injections holding a gold item / all injections (related and unrelated prompts
together); injection rate = share of prompts that get anything. Both selections are scored:
by cosine (the server's, with the model) at several thresholds, and by words (the fallback's:
FTS5 candidates holding at least MIN_TERMS of the prompt's terms making up at least a share).
Every injection goes through compose(), so the 600-character budget applies as in the hook.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
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
    load_peer,
)
from common import table, write_json  # noqa: E402

from lore_plugin.embedding.embedder import LocalEmbedder  # noqa: E402
from lore_plugin.recall import prompt_recall as pr  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from lore_plugin.recall.terms import keyword_terms  # noqa: E402

COSINES = (0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70)
WORD_RULES = ((2, 0.5), (2, 0.6), (3, 0.5), (3, 0.6), (3, 0.75), (4, 0.6))


@dataclass
class Prompt:
    """One question asked of one memory: the candidates either selection may inject."""

    related: bool
    gold: frozenset[str]  # fragment ids that answer it (empty for unrelated prompts)
    hybrid: list[tuple[Any, float]] = field(default_factory=list)  # (fragment, cosine)
    words: list[tuple[Any, int, float]] = field(default_factory=list)  # (fragment, held, share)


def candidates(memory: Memory, text: str, related: bool, gold: frozenset[str]) -> Prompt:
    found = memory.search(text[:pr.MAX_PROMPT], limit=pr.CANDIDATES)
    prompt = Prompt(related, gold)
    prompt.hybrid = [(s.fragment, s.similarity) for s in found.fragments if s.fragment.depth >= 1]
    # The fallback's own candidates, scored with every rule's loosest limits.
    terms = keyword_terms(text[:pr.MAX_PROMPT])
    for frag in pr.strong_by_words(memory.reader, text, set(), min_terms=1, min_coverage=0.0):
        held, share = pr.term_match(terms, frag)
        prompt.words.append((frag, held, share))
    return prompt


def ask_all(corpora: list[Corpus], folder: Path, model: LocalEmbedder,
            others: dict[int, tuple[Path, dict[str, str], Corpus]] | None = None) -> list[Prompt]:
    """Related prompts for every corpus; unrelated ones against others[i] when given."""
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    out: list[Prompt] = []
    for index, corpus in enumerate(corpora):
        db_path, ids = build_database(corpus, folder, embedder)
        by_key = {key: fid for fid, key in ids.items()}
        memory = Memory(db_path, embedder, clock=lambda c=corpus: c.now, tz=UTC)
        try:
            for q in corpus.questions:
                gold = frozenset(by_key[k] for k in q.gold if k in by_key)
                out.append(candidates(memory, q.text, True, gold))
        finally:
            memory.close()
        if others and index in others:
            other_db, _, other = others[index]
            memory = Memory(other_db, embedder, clock=lambda c=other: c.now, tz=UTC)
            try:
                out += [candidates(memory, q.text, False, frozenset()) for q in corpus.questions]
            finally:
                memory.close()
    return out


def score(prompts: list[Prompt], pick: Any) -> dict[str, float]:
    """pick(prompt) -> the fragments the selection would hand to compose()."""
    injected = correct = related_injected = unrelated_injected = 0
    related = sum(p.related for p in prompts)
    for p in prompts:
        _, ids = pr.compose(pick(p))
        if not ids:
            continue
        injected += 1
        if p.related:
            related_injected += 1
            correct += bool(p.gold & set(ids))
        else:
            unrelated_injected += 1
    return {"precision": round(correct / injected, 3) if injected else 0.0,
            "related_rate": round(related_injected / related, 3) if related else 0.0,
            "unrelated_rate": round(unrelated_injected / (len(prompts) - related), 3)
            if len(prompts) > related else 0.0,
            "injections": injected}


def evaluate(prompts: list[Prompt]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for t in COSINES:
        rows[f"cosine ≥ {t:.2f}"] = score(prompts, lambda p, t=t: [f for f, c in p.hybrid if c >= t])
    for n, share in WORD_RULES:
        rows[f"words: ≥ {n} terms, ≥ {share:.0%}"] = score(
            prompts, lambda p, n=n, s=share: [f for f, h, c in p.words if h >= n and c >= s])
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    model = LocalEmbedder(CACHE / "models")
    locomo = load_locomo(DEFAULT_LOCOMO, args.limit_conversations)
    peer = load_peer(DEFAULT_PEER)
    lfolder, pfolder = CACHE / "recall-locomo", CACHE / "recall-peer"
    lembed = CachedEmbedder(model, lfolder / "embeddings.sqlite")
    built = {i: (*build_database(c, lfolder, lembed), c) for i, c in enumerate(locomo)}
    shifted = {i: built[(i + 1) % len(locomo)] for i in built} if len(locomo) > 1 else None
    results: dict[str, Any] = {}
    results["locomo"] = evaluate(ask_all(locomo, lfolder, model, shifted))
    results["peer"] = evaluate(ask_all([peer], pfolder, model, {0: built[0]}))
    for name, rows in results.items():
        print(table(f"Prompt recall on {name}: related prompts vs unrelated ones",
                    ["selection", "precision", "inject (related)", "inject (unrelated)",
                     "injections"],
                    [[k, r["precision"], r["related_rate"], r["unrelated_rate"], r["injections"]]
                     for k, r in rows.items()]))
    write_json(args.json, "prompt_recall", {"results": results,
                                            "chosen": {"min_cosine": pr.MIN_COSINE,
                                                       "min_terms": pr.MIN_TERMS,
                                                       "min_coverage": pr.MIN_COVERAGE}})
    return results


if __name__ == "__main__":
    main()
