"""Does the per-prompt injection *show* the answer? (issue 30, answershown)

bench_prompt_recall.score counts an injection as answering when the answering fragment's id is
in it; but compose() clips lines to the 600-character budget, so an id can be counted while
the answer's words were cut. This scores the injected text itself, as the hook shows it:

- LoCoMo: each question carries its answer (`answer` in locomo10.json; the adversarial
  category 5 has `adversarial_answer` instead, the answer its false premise invites, which is
  what the evidence turn says). The answer is shown when the item lines hold at least
  ANSWER_SHARE of its keyword terms (recall.terms: lower case, stop words out, crude stems
  compared). An answer without a keyword term ("No", "Yes") is shown when an answering
  fragment's line is shown whole.
- The paraphrase and peer sets: the answer is the gold note; it is shown when its line is in
  the injection whole (not clipped).
Only the item lines count, not the frame's notice, whose words ("notes", "sessions") would
match answers by chance.

Compose variants (COMPOSERS) are scored with the chosen judge: the budget given as main gave
it (the first answer all it needs, the next ones what remains, each path once), in equal
shares, to one answer when the judge's first is well ahead, with the first path only,
without paths, and as compose() gives it now (a path yields to the answers' texts). Tried
and dropped, in commit 6a6cfad: a long text clipped around the prompt's words."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import prompt_cases as pc
from bench_recall import DEFAULT_LOCOMO

from lore_plugin.core.types import Fragment
from lore_plugin.recall import prompt_judge as pj
from lore_plugin.recall import prompt_recall as pr
from lore_plugin.recall.terms import keyword_terms, stem
from lore_plugin.safety.frame import neutralise

ANSWER_SHARE = 0.8  # of the answer's keyword terms the injected lines must hold
Composer = Callable[[pc.Case, list[Fragment]], tuple[str | None, list[str]]]


@cache
def locomo_answers(path: Path = DEFAULT_LOCOMO) -> dict[str, str]:
    """LoCoMo question -> its answer (every question text is asked once in the file)."""
    out: dict[str, str] = {}
    for sample in json.loads(path.read_text()):
        for qa in sample["qa"]:
            out[qa["question"]] = str(qa.get("answer", qa.get("adversarial_answer", "")))
    return out


def item_lines(text: str | None) -> str:
    """The injected items, without the frame and its notice."""
    return "\n".join(line for line in (text or "").splitlines()
                     if line.lstrip().startswith("- ["))


def whole(frag: Fragment, lines: str) -> bool:
    """Whether the fragment's text is in the lines unclipped (as item_line builds it)."""
    body = frag.summary
    if frag.content and frag.content.strip() != frag.summary.strip():
        body += " — " + frag.content
    return " ".join(neutralise(body).split()) in lines


def gold_fragments(case: pc.Case, ids: list[str]) -> list[Fragment]:
    known = {c.fragment.id: c.fragment for c in case.found + case.wide}
    return [known[i] for i in ids if i in case.gold and i in known]


def shown(case: pc.Case, text: str | None, ids: list[str], answer: str | None = None) -> bool:
    """Whether a related prompt's injection shows its answer (the module's rule); `answer`:
    a LoCoMo question's, else read from locomo10.json."""
    if not case.related or not ids:
        return False
    lines = item_lines(text)
    if case.dataset == "locomo":
        if answer is None:
            answer = locomo_answers().get(case.question, "")
        terms = keyword_terms(answer)
        if terms:
            return held(terms, lines) >= ANSWER_SHARE * len(terms)
    return any(whole(f, lines) for f in gold_fragments(case, ids))


def held(terms: list[str], text: str) -> int:
    """How many of `terms` the text holds, stems compared (terms.held_terms reads only a
    text's first 32 terms: an injection holds hundreds)."""
    present = {stem(t) for word in text.split() for t in keyword_terms(word)}
    return sum(1 for t in terms if stem(t) in present)


def one_if_ahead(case: pc.Case, frags: list[Fragment], margin: float,
                 **options: bool) -> tuple[str | None, list[str]]:
    """Only the first answer when the judge's model rates it `margin` above the second."""
    rated = {c.fragment.id: pj.probability(c) for c in case.found}
    if len(frags) > 1 and rated.get(frags[0].id, 0.0) - rated.get(frags[1].id, 0.0) >= margin:
        frags = frags[:1]
    return compose(case, frags, **options)


def compose(case: pc.Case, frags: list[Fragment], paths: bool = True,
            first_path: bool = False, path_yields: bool = True) -> tuple[str | None, list[str]]:
    where = case.where if paths else {}
    if first_path:  # only the first answer's path: the others say where they are by date
        where = {f.id: case.where.get(f.id, "") for f in frags[:1]}
    return pr.compose(frags, where=where, path_yields=path_yields)


def shares(needs: list[int], budget: int) -> list[int]:
    """Each item's room when the budget is shared equally: an item needing less than an
    equal share of what is left gets what it needs, the others split the rest."""
    rooms, left = list(needs), budget
    order = sorted(range(len(needs)), key=lambda i: needs[i])
    while order:
        share = left // len(order)
        if needs[order[0]] > share:
            for i in order:
                rooms[i] = share
            break
        left -= needs[order.pop(0)]
    return rooms


def equal_shares(case: pc.Case, frags: list[Fragment]) -> tuple[str | None, list[str]]:
    """compose() with each answer at most an equal share of the budget (paths once, as
    compose; fewer answers when a share is too small for the last). Not kept: a /tmp
    simulation of the last session's, with the nesting."""
    chosen = list(frags)
    while chosen:
        nested, seen = [], set()
        for f in chosen:
            path = case.where.get(f.id, "")
            nested.append(bool(path) and path in seen)
            seen.add(path)

        def line(f: Fragment, inner: bool, room: int) -> str | None:
            got = pr.item_line(f, room - (len(pr.NESTED) if inner else 0),
                               "" if inner else case.where.get(f.id, ""))
            return None if got is None else (pr.NESTED if inner else "") + got
        needs = [len(line(f, n, 1 << 20) or "") + 1 for f, n in zip(chosen, nested, strict=True)]
        lines = [line(f, n, r - 1) for f, n, r in
                 zip(chosen, nested, shares(needs, pr.BUDGET), strict=True)]
        if all(x is not None for x in lines):
            groups: dict[str, list[str]] = {}
            for f, x in zip(chosen, lines, strict=True):
                groups.setdefault(case.where.get(f.id, "") or f.id, []).append(x or "")
            body = "\n".join(x for g in groups.values() for x in g)
            return pr.render.recalled(body, pr.NOTICE), [f.id for f in chosen]
        chosen.pop()
    return None, []


def whole_first(case: pc.Case, frags: list[Fragment], only: bool = False
                ) -> tuple[str | None, list[str]]:
    """The answers whose whole line fits in what is left first, in the judge's order, then
    the others (clipped); `only`: the others left out (the first kept if none fits)."""
    room, fits, rest = pr.BUDGET, [], []
    for f in frags:
        need = len(pr.item_line(f, 1 << 20, "" if only else case.where.get(f.id, "")) or "") + 1
        if need <= room:
            fits.append(f)
            room -= need
        else:
            rest.append(f)
    return compose(case, (fits or frags[:1]) if only else fits + rest)


COMPOSERS: dict[str, Composer] = {
    "first all it needs, paths once (main)": lambda c, f: compose(c, f, path_yields=False),
    "equal shares (paths once)": equal_shares,
    "the first answer's path only": lambda c, f: compose(c, f, first_path=True,
                                                         path_yields=False),
    "without paths": lambda c, f: compose(c, f, paths=False),
    "one answer when the judge's first leads by 0.2": lambda c, f: one_if_ahead(c, f, 0.2),
    "one answer when it leads by 0.4": lambda c, f: one_if_ahead(c, f, 0.4),
    "a path yields to the answers' texts (chosen)": compose,
    "the same, answers that fit whole first": whole_first,
    "the same, only answers that fit whole": lambda c, f: whole_first(c, f, only=True),
}


def score(cases: list[pc.Case], rule: Callable[[pc.Case], list[Fragment]],
          composer: Composer = compose) -> dict[str, float]:
    """Coverage and precision by ids (as bench_prompt_recall.score) and by the answer shown,
    and the mean characters of item lines an injection carries."""
    related = injected = by_id = by_text = chars = 0
    for case in cases:
        text, ids = composer(case, rule(case))
        related += case.related
        if not ids:
            continue
        injected += 1
        chars += len(item_lines(text))
        by_id += case.related and bool(case.gold & set(ids))
        by_text += shown(case, text, ids)
    return {"coverage": round(by_id / related, 3) if related else 0.0,
            "precision": round(by_id / injected, 3) if injected else 0.0,
            "shown coverage": round(by_text / related, 3) if related else 0.0,
            "shown precision": round(by_text / injected, 3) if injected else 0.0,
            "characters": round(chars / injected) if injected else 0}


def rows(mine: dict[str, list[pc.Case]], columns: tuple[str, ...]
         ) -> tuple[list[list[str]], dict[str, dict[str, dict[str, float]]]]:
    """The chosen judge under each composer: a table's rows and the figures."""
    out, figures = [], {}
    for name, composer in COMPOSERS.items():
        got = {h: score(mine[h], lambda c: pj.judge(c.found), composer) for h in columns}
        figures[name] = got
        out.append([name] + [" / ".join(f"{got[h][k]:.3f}" for k in
                                        ("coverage", "precision", "shown coverage",
                                         "shown precision")) + f" / {got[h]['characters']}"
                             for h in columns])
    return out, figures


def examples(cases: list[pc.Case], limit: int = 6) -> None:
    """Related LoCoMo prompts whose injection holds the answering id but not the answer."""
    printed = 0
    for case in cases:
        if case.dataset != "locomo" or not case.related:
            continue
        text, ids = compose(case, pj.judge(case.found))
        if case.gold & set(ids) and not shown(case, text, ids):
            print(f"\n[{case.half}] {case.question} -> answer {locomo_answers()[case.question]!r}")
            print(item_lines(text))
            printed += 1
            if printed >= limit:
                return
