"""Why the answer is not among the per-prompt candidates (issue 30): the related prompts of
a `bench_prompt_recall.py --cases` file whose gold item none of the hook's candidates is,
each put in one class (the first that applies, in CLASSES' order), with a count per class
and per half, and the prompts themselves with `--show`.

    python bench/prompt_misses.py --cases PKL [--half tuning] [--show CLASS] [--dataset locomo]

Classes, read from the gold item in its own memory (the cached databases bench_recall.py
builds; nothing is searched again):
- period: the prompt names a time longer than a day (timeparse: "last week", "in May 2023",
  "early March") — the day rule's windows do not reach it;
- day: it names a single day;
- no shared word: the gold item and its branch hold none of the prompt's keyword terms
  (a paraphrase: only meaning can find it);
- name: the prompt holds a capitalised word (not its first) or a quoted term that the gold
  item holds and fewer than NAME_SHARE of the memory's rows hold (a name the rare-word
  search could have asked for);
- child of a matched heading: the gold item's parent was found (its children are among the
  candidates, descended) but the gold item was not among the children kept;
- a sibling was chosen: a note under the same parent is a candidate, not the gold one (the
  right place, the wrong line);
- other: shares words with the prompt, and nothing of its branch was found.

With `--judge`, the other side: the related prompts whose gold item IS among the candidates
but not in what the chosen judge injects, each in one class of JUDGED (nothing is read but
the cases file):
- rejected by agreement: the gold item holds less than MIN_AGREEMENT of the prompt's IDF
  mass with its branch (something else injected, or nothing);
- silent, below the bar: it agrees, but no agreeing candidate reaches MIN_EVIDENCE;
- below the band: others pass, the gold item's evidence is under the band;
- ranking: it is in the band, and the model put MOST others first;
- cut by the budget: the judge chose it, but the 600 characters ran out before it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompt_cases as pc  # noqa: E402
from bench_recall import (  # noqa: E402
    CACHE,
    DEFAULT_LOCOMO,
    DEFAULT_PEER,
    CachedEmbedder,
    build_database,
    load_locomo,
    load_paraphrase,
    load_peer,
)

from lore_plugin.core import timeparse  # noqa: E402
from lore_plugin.core.types import Fragment  # noqa: E402
from lore_plugin.embedding.embedder import LocalEmbedder  # noqa: E402
from lore_plugin.recall import prompt_judge as pj  # noqa: E402
from lore_plugin.recall import prompt_recall as pr  # noqa: E402
from lore_plugin.recall.terms import keyword_terms  # noqa: E402
from lore_plugin.store import Store  # noqa: E402

CLASSES = ("period", "day", "no shared word", "name", "child of a matched heading",
           "a sibling was chosen (next turn)", "a sibling was chosen (2-3 turns away)",
           "a sibling was chosen", "other")
JUDGED = ("rejected by agreement (other injected)", "rejected by agreement (silent)",
          "silent, below the bar", "below the band", "ranking", "cut by the budget")
NAME_SHARE = 0.05  # a name held by more rows than this is not rare here (LoCoMo's speakers)
_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w'-]+|\"[^\"]+\"|'[^']+'")


def memories() -> dict[str, tuple[Store, float]]:
    """gold fragment id -> (its memory's store, the memory's now), for every set."""
    model = LocalEmbedder(CACHE / "models")
    out: dict[str, tuple[Store, float]] = {}
    corpora = [("recall-locomo", c) for c in load_locomo(DEFAULT_LOCOMO)]
    corpora += [("recall-peer", load_peer(DEFAULT_PEER)), ("recall-paraphrase", load_paraphrase())]
    for folder, corpus in corpora:
        emb = CachedEmbedder(model, CACHE / folder / "embeddings.sqlite")
        path, ids = build_database(corpus, CACHE / folder, emb)
        store = Store(path, readonly=True)
        out.update({fid: (store, corpus.now) for fid in ids})
    return out


def classify(case: pc.Case, store: Store, now: float) -> str:
    window = timeparse.parse(case.question, now)
    if window is not None:
        return "day" if window.end - window.start <= 36 * 3600 else "period"
    gold = store.get_many(sorted(case.gold))
    branch = {a for g in gold for a in store.ancestors(g)}
    tokens = store.fragment_tokens(sorted(set(gold) | branch))
    held = frozenset().union(*tokens.values()) if tokens else frozenset()
    rows, stats = store.term_statistics(keyword_terms(case.question))
    if not any(toks and toks <= held for toks, _ in stats.values()):
        return "no shared word"
    gold_tokens = frozenset().union(*(tokens.get(g, frozenset()) for g in gold))
    names = [m.group(0).strip("\"'") for m in _NAME.finditer(case.question)]
    _, name_stats = store.term_statistics([t for n in names for t in keyword_terms(n)])
    if any(toks <= gold_tokens and n < NAME_SHARE * rows for toks, n in name_stats.values()):
        return "name"
    parents = {f.parent_id for f in gold.values() if f.parent_id}
    if any(c.below and c.fragment.parent_id in parents for c in case.found):
        return "child of a matched heading"
    near = [abs(_turn(c.fragment) - _turn(g)) for c in case.found for g in gold.values()
            if c.fragment.parent_id == g.parent_id and _turn(g) >= 0 <= _turn(c.fragment)]
    if near:
        return "a sibling was chosen" + (" (next turn)" if min(near) == 1 else
                                         " (2-3 turns away)" if min(near) <= 3 else "")
    if any(c.fragment.parent_id in parents for c in case.found):
        return "a sibling was chosen"
    return "other"


def judged(case: pc.Case) -> str | None:
    """Why the chosen judge leaves out a gold item that is among the candidates (a JUDGED
    class); None when it answers or the gold item is not a candidate."""
    got = pj.judge(case.found)
    _, ids = pr.compose(got, where=case.where)
    found = pj.answered(case.found)
    gold = [c for c in found if c.fragment.id in case.gold]
    if case.gold & set(ids) or not gold:
        return None
    if case.gold & {f.id for f in got}:
        return JUDGED[5]
    best = max(gold, key=pj.evidence)
    if best.coverage < pj.MIN_AGREEMENT:
        return JUDGED[0] if ids else JUDGED[1]
    if not ids:
        return JUDGED[2]
    return JUDGED[3] if pj.evidence(best) < pj.MIN_EVIDENCE - pj.BAND else JUDGED[4]


def _turn(frag: Fragment) -> int:
    """A LoCoMo turn's place in its session (its key, "D3:5" -> 5), else -1."""
    key = str((frag.metadata or {}).get("key", ""))
    return int(key.rsplit(":", 1)[1]) if re.fullmatch(r"D\d+:\d+", key) else -1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--show", default=None, help="print the prompts of this class")
    parser.add_argument("--judge", action="store_true",
                        help="classify the judge's misses whose answer is a candidate")
    args = parser.parse_args(argv)
    if args.judge:
        return judge_misses(args.cases, args.dataset, args.show)
    where = memories()
    category = {q.text: q.category for c in load_locomo(DEFAULT_LOCOMO) for q in c.questions}
    by_category: Counter[tuple[str, str]] = Counter()
    counts: dict[tuple[str, str], Counter[str]] = {}
    totals: Counter[tuple[str, str]] = Counter()
    for case in pc.load(args.cases):
        if not case.related or (args.dataset and case.dataset != args.dataset):
            continue
        totals[case.dataset, case.half] += 1
        if case.gold & {c.fragment.id for c in case.found}:
            continue
        store, now = where[next(iter(case.gold))]
        kind = classify(case, store, now)
        counts.setdefault((case.dataset, case.half), Counter())[kind] += 1
        if case.dataset == "locomo":
            by_category[case.half, category.get(case.question, "?")] += 1
        if args.show and args.show == kind:
            print(f"  [{case.dataset}/{case.half}] {case.question}")
    for (dataset, half), got in sorted(counts.items()):
        n = totals[dataset, half]
        print(f"{dataset} {half}: {sum(got.values())} of {n} related prompts lack the answer; "
              + ", ".join(f"{k} {got[k]} ({got[k] / n:.3f})" for k in CLASSES if got[k]))
    for (half, cat), n in sorted(by_category.items()):
        print(f"locomo {half}, LoCoMo category {cat}: {n}")


def judge_misses(path: Path, dataset: str | None, show: str | None) -> None:
    counts: dict[tuple[str, str], Counter[str]] = {}
    totals: Counter[tuple[str, str]] = Counter()
    for case in pc.load(path):
        if not case.related or (dataset and case.dataset != dataset):
            continue
        totals[case.dataset, case.half] += 1
        kind = judged(case)
        if kind is None:
            continue
        counts.setdefault((case.dataset, case.half), Counter())[kind] += 1
        if show and show == kind:
            print(f"  [{case.dataset}/{case.half}] {case.question}")
    for (name, half), got in sorted(counts.items()):
        n = totals[name, half]
        print(f"{name} {half}: the answer a candidate but not injected for {sum(got.values())}"
              f" of {n} related prompts; "
              + ", ".join(f"{k} {got[k]} ({got[k] / n:.3f})" for k in JUDGED if got[k]))


if __name__ == "__main__":
    main()
