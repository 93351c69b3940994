"""LoCoMo's per-prompt figures by what the injected turns say, not only by LoCoMo's evidence
ids (issue 30): how much of the judge's imprecision there is the benchmark's labels, and what a
reader of the texts would reach.

    python bench/graded_precision.py --cases PKL [--ungraded OUT.jsonl]
    python bench/graded_precision.py --cases PKL [--dataset SET] --reader-prompts DIR [--parts 8]
    python bench/graded_precision.py --cases PKL [--dataset SET] --reader-picks [DIR | FILE]

bench_prompt_recall.py counts an injection as answering when it holds one of the question's
evidence turns. LoCoMo's evidence ids miss turns that also state the answer ("I made coconut
milk ice cream" for "what ice cream does Nate make?", labelled on another turn), so that
precision is a lower bound. bench/data/locomo_graded.json holds verdicts on (question, turn)
pairs, written by model instances that saw the question, LoCoMo's reference answer, the turn
and when it was sent (its rules are in the file), never the evidence ids nor which system
chose the pair. Counted "by meaning", an injection answers when it holds an evidence turn or a
turn graded as holding the answer. A non-evidence turn without a verdict counts as not
answering and is reported as ungraded: after a judge changes, `--ungraded` writes those pairs
(the graders' input form) to be graded the same way and added to the file.

The reader (`--reader-prompts`, `--reader-picks`): what a reader of the texts at prompt time
would reach, a bound for any cross-encoder or language model over today's candidates. For each
held-out LoCoMo prompt (every related one, and READER_UNRELATED unrelated ones, sampled with
a fixed seed) the first READER_TOP candidates by the shipped model's order are written out,
for model instances that see only the question and those turns (never a reference answer),
and choose at most three that answer, best first, or none. Their picks are then injected
instead of the judge's and scored as above (the unrelated prompts' rate is over the sample).

By category (LoCoMo's: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial)."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompt_cases as pc  # noqa: E402
from answer_shown import locomo_answers  # noqa: E402
from bench_recall import DEFAULT_LOCOMO  # noqa: E402

from lore_plugin.recall import prompt_judge as pj  # noqa: E402
from lore_plugin.recall import prompt_recall as pr  # noqa: E402
from lore_plugin.recall.prompt_evidence import Candidate  # noqa: E402

GRADED = Path(__file__).resolve().parent / "data" / "locomo_graded.json"
READER_TOP = 10  # candidates a reader sees, by the shipped order
READER_UNRELATED = 300  # held-out unrelated prompts sampled for the reader
READER_SEED = 11


def key(question: str, turn: str) -> str:
    return hashlib.sha1(f"{question}\0{turn}".encode()).hexdigest()[:12]


def verdicts(path: Path = GRADED) -> dict[str, bool]:
    return {k: v["holds_answer"] for k, v in json.loads(path.read_text())["verdicts"].items()}


@cache
def locomo_meta(path: Path = DEFAULT_LOCOMO) -> tuple[dict[str, int], dict[str, str]]:
    """(question -> LoCoMo category, a turn's first 60 characters as stored -> when it was
    sent)."""
    category: dict[str, int] = {}
    sent: dict[str, str] = {}
    for sample in json.loads(path.read_text()):
        category.update({qa["question"]: qa["category"] for qa in sample["qa"]})
        conversation = sample["conversation"]
        for name, turns in conversation.items():
            if name.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    sent[f"{t['speaker']}: {t['text']}"[:60]] = \
                        conversation.get(f"{name}_date_time", "?")
    return category, sent


def item(case: pc.Case, turn: str) -> dict[str, str]:
    """A pair in the graders' input form."""
    return {"id": key(case.question, turn), "question": case.question,
            "reference_answer": locomo_answers().get(case.question, "?"),
            "said_on": locomo_meta()[1].get(turn[:60], "?"), "turn": turn}


def texts(case: pc.Case) -> dict[str, str]:
    """Fragment id -> its text, for every candidate of the case: a LoCoMo turn as stored, a
    note of the other sets as the hook's line shows it (its path, summary and text)."""
    locomo = case.dataset == "locomo"
    return {c.fragment.id: c.fragment.content if locomo else line(c)
            for c in [*case.wide, *case.found]}


def line(c: Candidate) -> str:
    """A candidate as the hook's line shows it: its path, summary and text."""
    f = c.fragment
    body = f.summary if f.content.strip() == f.summary.strip() else f"{f.summary} — {f.content}"
    return f"{c.path}: {body}" if c.path else body


Picks = dict[str, list[str]]  # a case's pid() -> the fragment ids injected for it


def judged(cases: list[pc.Case]) -> Picks:
    """The shipped judge's injection for each case, as the hook composes it."""
    return {pid(c): pr.compose(pj.judge(c.found), where=c.where)[1] for c in cases}


def score(cases: list[pc.Case], picks: Picks, graded: dict[str, bool]
          ) -> tuple[dict[str, Counter[str]], list[dict[str, str]]]:
    """Counts per half and per half and category, and the pairs still without a verdict."""
    category = locomo_meta()[0]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    ungraded: dict[str, dict[str, str]] = {}
    for case in cases:
        ids = picks.get(pid(case))
        if ids is None:
            continue
        locomo = case.dataset == "locomo"
        groups = [case.half] + ([f"{case.half}, category {category.get(case.question, 0)}"]
                                if case.related and locomo else [])
        by_ids = bool(set(ids) & case.gold)
        by_meaning = by_ids  # the other sets' notes were written for their questions
        if ids and case.related and not by_ids and locomo:
            text = texts(case)
            for fid in ids:
                verdict = graded.get(key(case.question, text[fid]))
                by_meaning |= bool(verdict)
                if verdict is None:
                    pair = item(case, text[fid])
                    ungraded[pair["id"]] = pair
        for group in groups:
            n = counts[group]
            n["related" if case.related else "unrelated"] += 1
            n["injected"] += bool(ids)
            n["unrelated injected"] += bool(ids) and not case.related
            n["by ids"] += case.related and by_ids
            n["by meaning"] += case.related and by_meaning
    return counts, list(ungraded.values())


def table(counts: dict[str, Counter[str]]) -> list[str]:
    rows = ["| half, category | related | coverage by ids → by meaning | precision by ids → by "
            "meaning | unrelated |", "|---|---|---|---|---|"]
    for group, n in sorted(counts.items()):
        rel, inj = max(n["related"], 1), max(n["injected"], 1)
        unrelated = (f"{n['unrelated injected'] / n['unrelated']:.1%}" if n["unrelated"]
                     else "")
        rows.append(f"| {group} | {n['related']} | {n['by ids'] / rel:.3f} → "
                    f"{n['by meaning'] / rel:.3f} | {n['by ids'] / inj:.3f} → "
                    f"{n['by meaning'] / inj:.3f} | {unrelated} |")
    return rows


def reader_cases(cases: list[pc.Case], dataset: str = "locomo", half: str = pc.HALVES[1]
                 ) -> list[pc.Case]:
    held = [c for c in cases if c.dataset == dataset and c.half == half]
    unrelated = [c for c in held if not c.related]
    sample = random.Random(READER_SEED).sample(unrelated, min(READER_UNRELATED,
                                                               len(unrelated)))
    return [c for c in held if c.related] + sample


def shown_to_reader(case: pc.Case) -> list[str]:
    """The fragment ids a reader sees for the case, in the order it sees them."""
    found = pj.answered(case.found)
    return [c.fragment.id for c in sorted(found, key=lambda c: -pj.probability(c))][:READER_TOP]


def pid(case: pc.Case) -> str:
    prefix = "" if case.dataset == "locomo" else case.dataset + "\0"
    return hashlib.sha1((prefix + case.question).encode() + bytes([case.related])
                        ).hexdigest()[:10]


def write_reader_prompts(cases: list[pc.Case], out: Path, parts: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    prompts = []
    for case in cases:
        text = texts(case)
        prompts.append({"pid": pid(case), "question": case.question, "candidates": [
            {"n": i + 1, "said_on": locomo_meta()[1].get(text[fid][:60], "?"),
             "turn": text[fid]} if case.dataset == "locomo" else {"n": i + 1, "note": text[fid]}
            for i, fid in enumerate(shown_to_reader(case))]})
    random.Random(READER_SEED).shuffle(prompts)
    for part in range(parts):
        lines = [json.dumps(p) for p in prompts[part::parts]]
        (out / f"prompts-{part}.jsonl").write_text("\n".join(lines) + "\n")


READER_PICKS = GRADED.parent / "reader_picks.json"


def reader_choices(source: Path, dataset: str) -> dict[str, list[int]]:
    """pid -> the places a reader chose: the readers' out-*.json in a folder, or the set's
    picks (both halves) in a file such as bench/data/reader_picks.json."""
    if source.is_dir():
        chosen: dict[str, list[int]] = {}
        for path in sorted(source.glob("out-*.json")):
            chosen.update(json.loads(path.read_text()))
        return chosen
    halves = json.loads(source.read_text())["picks"].get(dataset, {})
    return {pid: places for picks in halves.values() for pid, places in picks.items()}


def reader_picks(cases: list[pc.Case], source: Path) -> Picks:
    chosen = reader_choices(source, cases[0].dataset if cases else "locomo")
    picks: Picks = {}
    for case in cases:
        numbers = chosen.get(pid(case))
        if numbers is None:
            continue
        shown = shown_to_reader(case)
        places = [n for n in dict.fromkeys(numbers) if 1 <= n <= len(shown)]
        ids = [shown[n - 1] for n in places[:pj.MOST]]
        picks[pid(case)] = ids
    return picks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--dataset", default="locomo",
                        help="the set (the verdicts are LoCoMo's; elsewhere the ids are exact)")
    parser.add_argument("--graded", type=Path, default=GRADED)
    parser.add_argument("--ungraded", type=Path, help="write the pairs without a verdict here")
    parser.add_argument("--reader-prompts", type=Path, help="write the reader's input here")
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--reader-picks", type=Path, nargs="?", const=READER_PICKS,
                        help="score the readers' picks: a folder of out-*.json, or a file "
                             "(bench/data/reader_picks.json when no path is given)")
    args = parser.parse_args(argv)
    cases = [c for c in pc.load(args.cases) if c.dataset == args.dataset]
    if args.reader_prompts:
        write_reader_prompts(reader_cases(cases, args.dataset), args.reader_prompts, args.parts)
        return
    graded = verdicts(args.graded)
    if args.reader_picks:
        asked = reader_cases(cases, args.dataset)
        picks = reader_picks(asked, args.reader_picks)
        print(f"a reader over the first {READER_TOP} candidates ({len(picks)} of "
              f"{len(asked)} prompts read)")
        counts, missing = score(asked, picks, graded)
        print("\n".join(table(counts)))
        print("\nthe shipped judge on the same prompts")
        counts, _ = score(asked, judged(asked), graded)
    else:
        counts, missing = score(cases, judged(cases), graded)
    print("\n".join(table(counts)))
    print(f"\n{len(missing)} injected pairs without a verdict (counted as not answering)")
    if args.ungraded and missing:
        args.ungraded.write_text("".join(json.dumps(p) + "\n" for p in missing))


if __name__ == "__main__":
    main()
