"""The per-prompt hook's selection (lore_plugin/recall/prompt_recall.py), scored as issue 30
asks: coverage, precision and the unrelated rate, on a tuning half and a held-out half.

    python bench/bench_prompt_recall.py [--limit-conversations N] [--json PATH] [--cases PKL]

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
600-character budget applies as in the hook.

The halves are prompt_cases.split's (SPLIT_SEED): constants are chosen on "tuning" only.
"before" is the rule until issue 30 (cosine ≥ 0.50, or ≥ 0.40 below a heading that reaches
0.50, at most 4 answers, in search order); "first judge" is issue 30's first session's (the
gate on fused evidence, answers by evidence); "after" is prompt_judge's (the same gate, the
answers in its band ordered by the fitted model: fit_prompt_judge.py; a reply to a question
among the candidates takes the question's words: prompt_replies.py), with its constants
varied around the chosen ones (the trade-off curve); "semantic path" rows vary
prompt_semantic's answer on meaning alone for a prompt the gate silences ("without the
semantic path" is the judge before it), "names path" rows prompt_names' answer for a prompt
made of names; "asked-for" rows vary asked_for.py's rule (a candidate about a neighbour of
what is asked kept from the gate; "without the asked-for rule" is the judge before it) and
"coverage: a prompt word no row holds weighs" rows weigh such a word more. The hook's
candidates are
prompt_recall.gather's (the replies included); the pool's wider settings are
prompt_candidates.candidates' alone. The ceiling rows say how often a gold
item is among the candidates at all, first, or among the first three (search order), and
in wider settings read from the pool (VARIANTS: search hits, children of a matched heading,
rare-word hits; prompt_cases.select), each also judged: no judge over these candidates can
cover more.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import answer_shown  # noqa: E402
import blind_cues  # noqa: E402
import prompt_cases as pc  # noqa: E402
import recall_tool  # noqa: E402
from bench_recall import (  # noqa: E402
    CACHE,
    DEFAULT_LOCOMO,
    DEFAULT_PEER,
    CachedEmbedder,
    Corpus,
    build_database,
    load_locomo,
    load_newuser,
    load_paraphrase,
    load_peer,
)
from common import percentile, table, write_json  # noqa: E402

from lore_plugin.core.types import Fragment  # noqa: E402
from lore_plugin.embedding.embedder import LocalEmbedder  # noqa: E402
from lore_plugin.recall import asked_for as af  # noqa: E402
from lore_plugin.recall import prompt_cued as pcu  # noqa: E402
from lore_plugin.recall import prompt_judge as pj  # noqa: E402
from lore_plugin.recall import prompt_names as pn  # noqa: E402
from lore_plugin.recall import prompt_recall as pr  # noqa: E402
from lore_plugin.recall import prompt_semantic as ps  # noqa: E402
from lore_plugin.recall import render  # noqa: E402
from lore_plugin.recall.prompt_candidates import PATH_CHARS, SEPARATOR  # noqa: E402
from lore_plugin.recall.prompt_evidence import Candidate, idf  # noqa: E402

DATASETS = ("paraphrase", "peer", "locomo", "peer-tool", "paraphrase-tool", "peer-placed",
            "paraphrase-tool-project", "peer-placed-project", "newuser")
# The project of the "-project" sets: a session started in this folder, as the MCP server
# runs in one, so that placement files its notes under "Project orchard" (storing._topic_name).
PROJECT = "/home/dev/orchard"
BOTH = "both halves"
COLUMNS = (*pc.HALVES, BOTH)
Rule = Callable[[pc.Case], list[Fragment]]


def hook(case: pc.Case, wide: bool = False) -> list[Candidate]:
    """The hook's candidates (as the checkout's defaults give them), or the whole pool."""
    return case.wide if wide else case.found


def pool(case: pc.Case, limit: int, children: int, rare: int) -> list[Candidate]:
    """The candidates that search's first `limit` hits, `children` children of each matched
    heading and `rare` hits for the prompt's rarest words give (prompt_cases.select)."""
    return pc.select(case.wide, limit, children, rare)


VARIANTS = [(10, 4, 0), (20, 4, 0), (10, 8, 0), (10, 4, 3), (10, 4, 5), (10, 4, 10),
            (20, 8, 5), (20, 8, 10)]


def before(case: pc.Case) -> list[Fragment]:
    """The selection until issue 30, as it was in prompt_recall.pick."""
    return [c.fragment for c in hook(case)
            if (c.branch >= 0.50 and c.cosine >= 0.40) or (not c.below and c.cosine >= 0.50)][:4]


def evidence(c: Candidate, keyword_weight: float = 0.4) -> float:
    """The first judge's score (issue 30's first session): cosine + 0.4 × keyword coverage."""
    return c.cosine + keyword_weight * c.coverage


def by_evidence(found: list[Candidate], min_evidence: float = 0.65, band: float = 0.10,
                most: int = 3, keyword_weight: float = 0.4, min_agreement: float = 0.3
                ) -> list[Fragment]:
    """The first judge: coverage ≥ 30 %, the best evidence ≥ 0.65, then every candidate
    within the band below that bar, at most 3."""
    ranked = sorted(((evidence(c, keyword_weight), i, c) for i, c in enumerate(found)
                     if c.coverage >= min_agreement), key=lambda t: (-t[0], t[1]))
    if not ranked or ranked[0][0] < min_evidence:
        return []
    return [c.fragment for e, _, c in ranked if e >= min_evidence - band][:most]


def semantic(case: pc.Case, agreeing: bool = False, **variant: Any) -> list[Fragment]:
    """The judge with the semantic path's constants varied (prompt_semantic.answer);
    `agreeing`: a note whose coverage passes the agreement rule counts as holding none of
    the prompt's words (it agrees on words, only its evidence was short of the bar)."""
    got = pj.judge(hook(case), semantic=False)
    found = pj.answered(hook(case))
    if agreeing:
        found = [replace(x, own=0.0) if x.coverage >= pj.MIN_AGREEMENT else x for x in found]
    return got or ps.answer(found, **variant)


def named(case: pc.Case, **variant: Any) -> list[Fragment]:
    """The judge with the names path's constants varied (prompt_names.answer), in the
    judge's order: the gate, a day's notes, the names, the semantic path."""
    got = pj.judge(hook(case), names=False, semantic=False)
    found = pj.answered(hook(case))
    if got or any(x.dated for x in found):
        return got or [x.fragment for x in found if x.dated][:pj.MOST]
    return pn.answer(found, pj.MOST, **variant) or ps.answer(found)


def cue_variant(case: pc.Case, **variant: Any) -> list[Fragment]:
    """The judge with the cue path's constants varied (prompt_cued.answer), in the judge's
    order: the gate, a day's notes, the names, the cues, the semantic path."""
    found = pj.answered(hook(case))
    return pj.judge(hook(case), cued=False, semantic=False) \
        or pcu.answer(found, **variant) or ps.answer(found)


def full_words(case: pc.Case, min_coverage: float = 0.95, min_own: float = 0.5
               ) -> list[Fragment]:
    """The judge, but when it gives nothing, the notes (in search's order, at most MOST)
    that hold all the prompt's rare words with their branch and `min_own` of them in their
    own text: "Sarah Chen work" against long notes that name her, whose cosine is low."""
    got = pj.judge(hook(case))
    if got:
        return got
    return [c.fragment for c in pj.answered(hook(case))
            if c.coverage >= min_coverage and c.own >= min_own][:pj.MOST]


def words_elsewhere(case: pc.Case, min_own: float = 0.3, field: str = "own"
                    ) -> list[Fragment]:
    """The judge, but the semantic path silent when another note holds `min_own` of the
    prompt's rare words in its own text (`field`): the words point at that note, which fell
    short of the gate; the closest by meaning is then the near miss ("Sourcegraph code
    search" → a note on the codebase indexer, while the note naming Sourcegraph waits)."""
    got = pj.judge(hook(case), semantic=False)
    found = pj.answered(hook(case))
    if got or any(getattr(x, field) >= min_own for x in found):
        return got
    return ps.answer(found)


def asking(case: pc.Case) -> list[Candidate]:
    """The hook's candidates, each with the phrase the prompt asks about (asked_for.py):
    a cases file written before Candidate.asked existed has it empty."""
    asked = af.asked_for(case.question)
    return [c if c.asked == asked else replace(c, asked=asked) for c in hook(case)]


def asked_variant(case: pc.Case, test: Callable[[Candidate], bool]) -> list[Fragment]:
    """The chosen judge without its asked-for rule, and instead a candidate for which `test`
    holds kept from the gate (its coverage taken away: the other paths do not read it)."""
    found = [replace(c, coverage=0.0) if c.asked and test(c) else c for c in asking(case)]
    return pj.judge(found, asked=False)


def asked_rows(c: Candidate) -> list[tuple[int, bool]]:
    """(rows holding it, held by the candidate with its branch) for each asked-for term."""
    where = {t: i for i, t in enumerate(c.terms)}
    return [(c.term_rows[where[t]], c.held_branch[where[t]]) for t in c.asked if t in where]


def unheld_weighed(case: pc.Case, factor: float) -> list[Fragment]:
    """The chosen judge with a prompt word no row holds weighing `factor` times its IDF in
    the coverage's mass (with the branch, and the candidate's own)."""
    found = []
    for c in hook(case):
        weights = [idf(n, c.rows) * (factor if n == 0 else 1.0) for n in c.term_rows]
        mass = sum(weights)
        if mass <= 0 or len(c.held_branch) != len(weights):
            found.append(c)
            continue
        found.append(replace(c, coverage=sum(w for w, h in zip(weights, c.held_branch) if h)
                             / mass, own=sum(w for w, h in zip(weights, c.held) if h) / mass))
    return pj.judge(found)


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {
        "before: cosine ≥ 0.50, ≥ 0.40 below a match, 4 answers": before,
        "first judge: evidence ≥ 0.65, band 0.10, 3 answers, by evidence":
            lambda c: by_evidence(hook(c)),
        f"after (chosen): evidence ≥ {pj.MIN_EVIDENCE:.2f}, band {pj.BAND:.2f}, "
        f"{pj.MOST} answers, by the model": lambda c: pj.judge(hook(c)),
    }
    out["chosen without the asked-for rule (main before it)"] = \
        lambda c: pj.judge(asking(c), asked=False)
    out["asked-for: silent gate when any asked word is held by no row"] = \
        lambda c: asked_variant(c, lambda x: any(n == 0 for n, _ in asked_rows(x)))
    out["asked-for: the answer must hold the head, if no row holds it"] = \
        lambda c: asked_variant(c, lambda x: bool(asked_rows(x)) and x.asked[-1] in x.terms
                                and asked_rows(x)[-1] == (0, False))
    out["asked-for: the answer must hold the head, if ≤ 1 row holds it"] = \
        lambda c: asked_variant(c, lambda x: bool(asked_rows(x)) and x.asked[-1] in x.terms
                                and asked_rows(x)[-1][0] <= 1 and not asked_rows(x)[-1][1])
    out["asked-for: a word no row holds, and the answer holds another asked word"] = \
        lambda c: asked_variant(c, lambda x: any(n == 0 for n, _ in asked_rows(x))
                                and any(h for _, h in asked_rows(x)))
    for factor in (2.0, 3.0):
        out[f"coverage: a prompt word no row holds weighs {factor:.0f}×"] = \
            lambda c, f=factor: unheld_weighed(c, f)
    out["asked-for (chosen): no row holds the head, the answer holds a modifier"] = \
        lambda c: pj.judge(asking(c))
    out["agreement on the note's own text (own ≥ 0.3), not with its branch"] = \
        lambda c: pj.judge([replace(x, coverage=0.0) if x.own < pj.MIN_AGREEMENT else x
                            for x in asking(c)])
    out["chosen without the semantic path (main before it)"] = \
        lambda c: pj.judge(hook(c), semantic=False)
    out["chosen without the names path (main before it)"] = \
        lambda c: pj.judge(hook(c), names=False)
    out["chosen without the cue path (main before it)"] = \
        lambda c: pj.judge(hook(c), cued=False)
    for bar in (0.55, 0.60, 0.62, 0.68, 0.70):
        out[f"cue path: the closest cue ≥ {bar:.2f}"] = \
            lambda c, b=bar: cue_variant(c, min_cue=b)
    out["cue path, a prompt naming what no note holds too"] = \
        lambda c: cue_variant(c, strangers=True)
    for weight in (0.0, 1.0, 2.0, 2.5, 3.5, 4.0):  # the order's closest cue (pj.CUE_WEIGHT)
        out[f"the order weighs the closest cue {weight:.1f}" + (" (main before it)" if not weight
                                                                 else "")] = \
            lambda c, w=weight: pj.judge(hook(c), weights=pj.WEIGHTS[:-1] + (w,))
    for few in (3, 5, 8):
        for common in (0, 1, 2):
            out[f"names path: rare = held by ≤ {few} rows, {common} other word(s)"] = \
                lambda c, f=few, m=common: named(c, few=f, common=m)
    out["names path, one rare word enough"] = lambda c: named(c, min_rare=1)
    out["names path, a note must hold every rare word (no spare word)"] = \
        lambda c: named(c, spare=False)
    for cos in (0.35, 0.40, 0.45):
        for lead in (0.06, 0.08, 0.10, 0.12):
            out[f"semantic path: cosine ≥ {cos:.2f}, lead ≥ {lead:.2f}"] = \
                lambda c, a=cos, m=lead: semantic(c, min_cosine=a, min_lead=m)
    out["semantic path, but the note may hold ≤ 15 % of the prompt's words"] = \
        lambda c: semantic(c, max_own=0.15)
    out["semantic path, but the note may hold any share of the prompt's words"] = \
        lambda c: semantic(c, max_own=1.0)
    out["semantic path, but a prompt naming what no note holds answered too"] = \
        lambda c: semantic(c, strangers=True)
    out["semantic path, any words and strangers answered"] = \
        lambda c: semantic(c, max_own=1.0, strangers=True)
    out["semantic path, but a note agreeing on words (coverage ≥ the gate's) may answer too"] = \
        lambda c: semantic(c, agreeing=True)
    out["semantic path, but a question given rather than its reply"] = \
        lambda c: semantic(c, replies=False)
    for field in ("own", "coverage"):
        for share in (0.3, 0.5):
            out[f"semantic path silent when a note's {field} ≥ {share:.1f}"] = \
                lambda c, f=field, m=share: words_elsewhere(c, m, f)
    for cov, own in ((0.95, 0.5), (0.95, 0.6), (0.95, 0.7), (0.8, 0.5), (0.95, 0.0)):
        out[f"chosen, else notes holding ≥ {cov:.2f} of the words, ≥ {own:.2f} their own"] = \
            lambda c, a=cov, b=own: full_words(c, a, b)
    out["chosen, and a prompt naming what no note holds silenced on every path"] = \
        lambda c: [] if any(x.stranger for x in hook(c)) else pj.judge(hook(c))
    for lim, kids, rare in VARIANTS:
        out[f"chosen over {lim} hits, {kids} children, {rare} rare-word hits"] = \
            lambda c, v=(lim, kids, rare): pj.judge(pool(c, *v))
        out[f"first judge over {lim} hits, {kids} children, {rare} rare-word hits"] = \
            lambda c, v=(lim, kids, rare): by_evidence(pool(c, *v))
    for agree in (0.0, 0.2, 0.4):
        out[f"chosen, but coverage ≥ {agree:.2f}"] = \
            lambda c, a=agree: pj.judge(hook(c), min_agreement=a)
    for band in (0.05, 0.15, 0.20):
        out[f"chosen, but band {band:.2f}"] = lambda c, b=band: pj.judge(hook(c), band=b)
    for most in (1, 2, 4):
        out[f"chosen, but {most} answer" + ("s" if most > 1 else "")] = \
            lambda c, m=most: pj.judge(hook(c), most=m)
    for weight in (0.2, 0.4, 0.6):
        for bar in (0.55, 0.60, 0.65, 0.70, 0.75, 0.80):
            out[f"judge with cosine + {weight:.1f} × coverage ≥ {bar:.2f}"] = \
                lambda c, w=weight, b=bar: pj.judge(hook(c), min_evidence=b, keyword_weight=w)
    out["words (no server): 3 terms, 60 %, path included"] = lambda c: c.words
    return out


def score(cases: list[pc.Case], rule: Rule) -> dict[str, float]:
    related = unrelated = answered = injected = wrong = 0
    for case in cases:
        _, ids = pr.compose(rule(case), where=case.where)
        related += case.related
        unrelated += not case.related
        if not ids:
            continue
        injected += 1
        answered += case.related and bool(case.gold & set(ids))
        wrong += not case.related
    return {"coverage": round(answered / related, 3) if related else 0.0,
            "precision": round(answered / injected, 3) if injected else 0.0,
            "unrelated": round(wrong / unrelated, 3) if unrelated else 0.0}


def curve(scored: dict[str, dict[str, dict[str, float]]], most_unrelated: float = 0.02
          ) -> list[str]:
    """The rules on the trade-off curve: unrelated ≤ 2 % on the tuning half, and no other
    such rule with both more coverage and more precision there; by coverage."""
    fine = {k: v for k, v in scored.items() if "ceiling" not in k
            and v[pc.HALVES[0]]["unrelated"] <= most_unrelated}

    def beaten(a: dict[str, float]) -> bool:
        return any(b["coverage"] >= a["coverage"] and b["precision"] >= a["precision"]
                   and (b["coverage"], b["precision"]) != (a["coverage"], a["precision"])
                   for b in (v[pc.HALVES[0]] for v in fine.values()))
    front = [k for k, v in fine.items() if not beaten(v[pc.HALVES[0]])]
    return sorted(front, key=lambda k: fine[k][pc.HALVES[0]]["coverage"])


def ceiling(cases: list[pc.Case]) -> dict[str, float]:
    related = [c for c in cases if c.related]
    n = len(related) or 1

    def share(k: int | None, found: dict[int, list[Candidate]]) -> float:
        return round(sum(any(x.fragment.id in c.gold for x in found[id(c)][:k])
                         for c in related) / n, 3)
    found = {id(c): hook(c) for c in related}
    out = {"any candidate": share(None, found), "first": share(1, found),
           "first three": share(3, found)}
    for v in VARIANTS:
        out["any of " + "/".join(map(str, v))] = share(None, {id(c): pool(c, *v) for c in related})
    return out


def echoed_paths(cases: list[pc.Case]) -> tuple[int, int, int]:
    """(the related prompts' candidates with a path, those whose path repeats a level, those
    whose path holds the candidate's own summary): the copies of a fact that placement names
    headings after (recall/copy_chains.py) read "X… › X… › X"."""
    with_path = repeats = own = 0
    for case in (c for c in cases if c.related):
        for c in hook(case):
            levels = c.path.split(SEPARATOR) if c.path else []
            with_path += bool(levels)
            repeats += any(a == b for a, b in zip(levels, levels[1:]))
            own += render.clip(c.fragment.summary, PATH_CHARS) in levels
    return with_path, repeats, own


def show(cases: list[pc.Case], rule: Rule) -> None:
    """Every related prompt the rule leaves without its answer (what it injected instead, or
    nothing, and where the gold item stood among the candidates) and every unrelated prompt
    it injects for: the cases to read before changing the judge."""
    for case in cases:
        got = rule(case)
        _, ids = pr.compose(got, where=case.where)
        if case.related and case.gold & set(ids) or not case.related and not ids:
            continue
        gold = [(i, c) for i, c in enumerate(hook(case)) if c.fragment.id in case.gold]
        print(f"\n[{case.dataset} {case.half} {'related' if case.related else 'UNRELATED'}]"
              f" {case.question}")
        for i, c in gold:
            print(f"  gold #{i} d{c.fragment.depth} cos {c.cosine:.2f} cov {c.coverage:.2f}"
                  f" own {c.own:.2f} rank {c.rank}: {c.fragment.summary[:90]}")
        if case.related and not gold:
            print("  gold not among the candidates")
        for f in got:
            c = next(x for x in hook(case) if x.fragment.id == f.id)
            print(f"  got d{f.depth} cos {c.cosine:.2f} cov {c.coverage:.2f} own {c.own:.2f}"
                  f" rank {c.rank} {'' if f.id in ids else '(cut) '}"
                  f"{case.where.get(f.id, '')} > {f.summary[:80]}")


def not_first(cases: list[pc.Case]) -> None:
    """Every related prompt whose answer is not the hook's first candidate: what is first
    instead and the best-placed answer, each with its cosine, search rank, place among its
    heading's children, parent id and path (issue 30, rankfirst: a fact's vector embeds its
    parent's name, so a move to another heading moves its cosine)."""
    for case in (c for c in cases if c.related):
        found = hook(case)
        if found and found[0].fragment.id in case.gold:
            continue
        print(f"\n[{case.dataset} {case.half}] {case.question}")
        gold = next(((i, c) for i, c in enumerate(found) if c.fragment.id in case.gold), None)
        for label, (i, c) in ((("first", (0, found[0])),) if found else ()) + (
                (("answer", gold),) if gold else ()):
            print(f"  {label} #{i} cos {c.cosine:.3f} rank {c.rank} child {c.child} parent "
                  f"{(c.fragment.parent_id or '-')[:8]} path {c.path!r}: "
                  f"{c.fragment.summary[:80]}")
        if gold is None:
            print("  answer not among the candidates")


def ask_newuser(model: LocalEmbedder, timings: list[float]) -> list[pc.Case]:
    """The blind "new user" set (bench/data/newuser.json, load_newuser): every note stored
    through store_memory's path, oldest first, each on its day and in its own project (none
    for a general note: prompt_cases.store_placed); every related prompt asked from its
    answer's project, the set's own unrelated prompts in turn from atlas and lumen
    (newuser.asked_from). Related and unrelated prompts are each split in halves."""
    corpus = load_newuser()
    folder = CACHE / "recall-newuser"
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    db = folder / "newuser.db"
    ids = pc.store_placed(corpus, db, embedder, projects=corpus.meta["projects"])
    unrelated = corpus.meta["unrelated"]
    halves = pc.split([q.text for q in corpus.questions]) | pc.split([q.text for q in unrelated])
    return pc.ask_all("newuser", corpus, db, ids, None, None, halves, embedder, timings,
                      unrelated=unrelated, asked_from=corpus.meta["asked_from"])


def collect(limit: int | None, only: set[str]) -> tuple[list[pc.Case], dict[str, list[float]]]:
    """The cases of the sets in `only`; "peer-tool" and "paraphrase-tool" are the peer corpus
    and the paraphrase set's facts stored one note at a time through store_memory (peer:
    recall_tool.store_one_by_one, a topic per project given, every note stored on one day;
    paraphrase: content and summary only, Lore's placement making the topics and concepts:
    prompt_cases.store_placed); "peer-placed" is the peer's notes stored as the paraphrase's,
    each on its own day; the "-project" sets are those two stored and asked with the memory's
    project set (PROJECT), as a new user's session in a project stores them; "newuser" is
    the set written blind to the rules (ask_newuser)."""
    model = LocalEmbedder(CACHE / "models")
    timings: dict[str, list[float]] = {d: [] for d in DATASETS}
    cases: list[pc.Case] = []
    if "newuser" in only:
        cases += ask_newuser(model, timings["newuser"])
    if not only - {"newuser"}:  # it needs neither LoCoMo nor the peer corpus
        return cases, timings
    locomo = load_locomo(DEFAULT_LOCOMO, limit if "locomo" in only else 1)
    peer, para = load_peer(DEFAULT_PEER), load_paraphrase()
    lf, pf, qf = CACHE / "recall-locomo", CACHE / "recall-peer", CACHE / "recall-paraphrase"
    tf = CACHE / "recall-peer-tool"
    emb = {f: CachedEmbedder(model, f / "embeddings.sqlite") for f in (lf, pf, qf, tf)}
    built = {i: build_database(c, lf, emb[lf])
             for i, c in enumerate(locomo if "locomo" in only else locomo[:1])}
    peer_db, peer_ids = build_database(peer, pf, emb[pf])
    if "paraphrase" in only:
        para_db, para_ids = build_database(para, qf, emb[qf])
        cases += pc.ask_all("paraphrase", para, para_db, para_ids, peer, peer_db,
                            pc.split([q.text for q in para.questions]), emb[qf],
                            timings["paraphrase"])
    if "peer" in only:
        cases += pc.ask_all("peer", peer, peer_db, peer_ids, locomo[0], built[0][0],
                            pc.split([q.text for q in peer.questions]), emb[pf], timings["peer"])
    tool_now = recall_tool.peer_now(DEFAULT_PEER)
    tool_db = tf / "peer-tool.db"
    tool = Corpus("peer-tool", [], peer.questions, 1, tool_now)
    if only & {"peer-tool", "paraphrase-tool", "paraphrase-tool-project"}:
        tool_ids = recall_tool.store_one_by_one(DEFAULT_PEER, tool_db, emb[tf], tool_now)
    if "peer-tool" in only:
        cases += pc.ask_all("peer-tool", tool, tool_db, tool_ids, locomo[0], built[0][0],
                            pc.split([q.text for q in peer.questions]), emb[tf],
                            timings["peer-tool"])
    if "paraphrase-tool" in only:
        placed_db = qf / "paraphrase-tool.db"
        placed_ids = pc.store_placed(para, placed_db, emb[qf])
        cases += pc.ask_all("paraphrase-tool", replace(para, name="paraphrase-tool"),
                            placed_db, placed_ids, tool, tool_db,
                            pc.split([q.text for q in para.questions]), emb[qf],
                            timings["paraphrase-tool"])
    if "peer-placed" in only:
        placed_db = pf / "peer-placed.db"
        placed_ids = pc.store_placed(peer, placed_db, emb[pf])
        cases += pc.ask_all("peer-placed", replace(peer, name="peer-placed"), placed_db,
                            placed_ids, locomo[0], built[0][0],
                            pc.split([q.text for q in peer.questions]), emb[pf],
                            timings["peer-placed"])
    for name, corpus, folder, other in (("paraphrase-tool-project", para, qf, (tool, tool_db)),
                                        ("peer-placed-project", peer, pf,
                                         (locomo[0], built[0][0]))):
        if name in only:  # the sets above, stored and asked in a project (PROJECT)
            placed_db = folder / f"{name}.db"
            placed_ids = pc.store_placed(corpus, placed_db, emb[folder], project=PROJECT)
            cases += pc.ask_all(name, replace(corpus, name=name), placed_db, placed_ids, *other,
                                pc.split([q.text for q in corpus.questions]), emb[folder],
                                timings[name], project=PROJECT)
    if "locomo" in only:
        halves = pc.split([c.name for c in locomo])
        for i, c in enumerate(locomo):
            j = (i + 1) % len(locomo)
            other = (locomo[j], built[j][0]) if j != i else (None, None)
            cases += pc.ask_all("locomo", c, *built[i], *other, halves, emb[lf],
                                timings["locomo"])
    return cases, timings


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--json")
    parser.add_argument("--cases", type=Path, help="reuse (or write) the cases in this file")
    parser.add_argument("--only", default=",".join(DATASETS),
                        help="the sets to search and score, comma-separated: "
                        + ", ".join(DATASETS))
    parser.add_argument("--examples", type=int, default=0,
                        help="print this many LoCoMo injections holding the answer's id "
                        "but not its words")
    parser.add_argument("--show", action="store_true",
                        help="print every related prompt of the chosen judge that did not "
                        "answer, and every injection that is not an answer")
    parser.add_argument("--not-first", action="store_true",
                        help="print every related prompt whose answer is not the first "
                        "candidate: what is first instead, and where the answer stands")
    parser.add_argument("--cues", type=Path, nargs="+", default=None,
                        help="give the notes the cues of these files (bench/data/blind_cues.json, "
                             "bench/data/locomo_cues.json), stored beside them as extraction or "
                             "store_memory would")
    args = parser.parse_args(argv)
    if args.cues:
        print(f"cues for {blind_cues.use(args.cues)} notes from "
              f"{', '.join(map(str, args.cues))}")
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if only - set(DATASETS):
        parser.error(f"unknown set(s) {', '.join(sorted(only - set(DATASETS)))}")
    timings: dict[str, list[float]] = {}
    if args.cases and args.cases.exists():
        cases = pc.load(args.cases)
    else:
        cases, timings = collect(args.limit_conversations, only)
        if args.cases:
            pc.save(cases, args.cases)
    results: dict[str, Any] = {}
    for name in (d for d in DATASETS if d in only):
        mine = {h: [c for c in cases if c.dataset == name and c.half == h] for h in pc.HALVES}
        mine[BOTH] = mine[pc.HALVES[0]] + mine[pc.HALVES[1]]
        counts = ", ".join(f"{h} {sum(c.related for c in mine[h])}" for h in pc.HALVES)
        rows, results[name] = [], {}
        for rule_name, rule in rules().items():
            got = {h: score(mine[h], rule) for h in COLUMNS}
            results[name][rule_name] = got
            rows.append([rule_name] + [" / ".join(f"{got[h][k]:.3f}" for k in
                                                  ("coverage", "precision", "unrelated"))
                                       for h in COLUMNS])
        front = curve(results[name])
        limits = {h: ceiling(mine[h]) for h in COLUMNS}
        results[name]["ceiling"] = limits
        rows.append(["ceiling: gold among the candidates / first / first three / among "
                     + " / ".join("/".join(map(str, v)) for v in VARIANTS) + " (hits/children/rare)"]
                    + [" / ".join(f"{v:.3f}" for v in limits[h].values()) for h in COLUMNS])
        speed = ""
        if timings.get(name):
            speed = (f"; candidates and evidence p50 {percentile(timings[name], 50) * 1000:.1f} ms,"
                     f" p95 {percentile(timings[name], 95) * 1000:.1f} ms")
        print(table(f"Prompt recall on {name} (related prompts: {counts}; "
                    f"coverage / precision / unrelated{speed})",
                    ["selection", *COLUMNS], rows), flush=True)
        paths_seen, repeating, naming = echoed_paths(mine[BOTH])
        print(f"paths above the candidates (related prompts): {paths_seen}, repeating a level "
              f"{repeating}, naming the candidate itself {naming}", flush=True)
        print(table(f"Trade-off curve on {name}: unrelated ≤ 2 % on the tuning half, best "
                    "coverage for its precision there", ["selection", *pc.HALVES],
                    [[k] + [" / ".join(f"{results[name][k][h][m]:.3f}" for m in
                                       ("coverage", "precision", "unrelated"))
                            for h in pc.HALVES] for k in front]), flush=True)
        results[name]["curve"] = front
        shown_rows, results[name]["answer shown"] = answer_shown.rows(mine, COLUMNS)
        print(table(f"Answer shown on {name}, the chosen judge: coverage / precision by ids, "
                    "then by the answer shown in the text (answer_shown.py) / characters of "
                    "items per injection", ["compose", *COLUMNS], shown_rows), flush=True)
        if args.show:
            show(mine[BOTH], lambda c: pj.judge(hook(c)))
        if args.not_first:
            not_first(mine[BOTH])
    answer_shown.examples(cases, args.examples)
    chosen = {"weights": pj.WEIGHTS, "bias": pj.BIAS, "keyword_weight": pj.KEYWORD_WEIGHT,
              "min_evidence": pj.MIN_EVIDENCE, "band": pj.BAND, "most": pj.MOST,
              "min_agreement": pj.MIN_AGREEMENT, "split_seed": pc.SPLIT_SEED,
              "semantic_min_cosine": ps.MIN_COSINE, "semantic_min_lead": ps.MIN_LEAD,
              "semantic_lead_over": ps.LEAD_OVER, "names_few": pn.FEW,
              "names_few_share": pn.FEW_SHARE, "names_common": pn.COMMON,
              "names_min_rare": pn.MIN_RARE}
    write_json(args.json, "prompt_recall", {"results": results, "chosen": chosen,
                                            "timings_ms": {k: [round(t * 1000, 2) for t in v]
                                                           for k, v in timings.items()}})
    return results


if __name__ == "__main__":
    main()
