"""How far any judge could go on the candidates the per-prompt hook finds (issue 30): the
ceiling its evidence sets, read from bench_prompt_recall.py's cases.

    python bench/prompt_ceiling.py --cases PKL [--most 3]

A judge injects at most MOST of a prompt's candidates, so a prompt's injection can hold its
answer only when the answer is among the candidates ("pool") and is put among the first MOST
by whatever orders them. An oracle gate (inject exactly for the prompts whose first MOST hold
the answer) then reaches coverage = that share at precision 1.0, and no gate does better:
coverage ≥ 0.70 needs the answer among the first MOST for at least 70 % of the prompts. Each
set and half, as shares of its related prompts:
- pool: the answer among the candidates at all;
- shipped @1 / @MOST: first by prompt_judge.probability, the model the hook orders by;
- fitted @1 / @MOST: first by a listwise model over every field of the evidence
  (prompt_evidence.Candidate: cosine, coverage, own coverage, search's place, closest cue,
  heading cosine, how it was found, length), fitted on the set's own tuning half by softmax
  cross-entropy: roughly the best order these fields allow for that kind of memory;
- gate @0.90: the best coverage a bar on the likelihood of the fitted order's first candidate
  reaches while at least 90 % of the injections (unrelated prompts' included) hold an answer.
  The likelihood is a logistic model over the same fields and each one's lead over the
  prompt's best (fit_prompt_judge.fit, unrelated prompts' candidates as negatives), fitted on
  the set's tuning half too; the bar is chosen on the tuning half and applied to both.
numpy only; the held-out half is never fitted on."""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompt_cases as pc  # noqa: E402
from fit_prompt_judge import fit as fit_logistic  # noqa: E402

from lore_plugin.recall import prompt_judge as pj  # noqa: E402
from lore_plugin.recall.prompt_evidence import Candidate  # noqa: E402

ORDER = ("cosine", "coverage", "own", "place", "cue", "branch", "below", "child", "rare",
         "reply", "length")
FIELDS = ORDER + ("cosine lead", "coverage lead", "own lead", "cue lead")  # the gate's
STEPS = 300
RATE = 0.5
L2 = 0.01
PRECISION = 0.90


def fields(found: list[Candidate]) -> np.ndarray:
    """One row of FIELDS per candidate; the leads are against the prompt's best candidate."""
    best = {k: max((getattr(c, k) for c in found), default=0.0)
            for k in ("cosine", "coverage", "own", "cue")}
    return np.array([[c.cosine, c.coverage, c.own, 1 / (1 + c.rank), c.cue, c.branch,
                      float(c.below), float(c.child >= 0), float(c.rare >= 0),
                      float(bool(c.follows)), math.log1p(len(c.fragment.content)) / 6,
                      c.cosine - best["cosine"], c.coverage - best["coverage"],
                      c.own - best["own"], c.cue - best["cue"]] for c in found]
                    ).reshape(len(found), len(FIELDS))


def prepared(cases: list[pc.Case]) -> list[tuple[pc.Case, list[Candidate], np.ndarray, np.ndarray]]:
    out = []
    for case in cases:
        found = pj.answered(case.found)
        gold = np.array([float(c.fragment.id in case.gold) for c in found])
        out.append((case, found, fields(found), gold))
    return out


Group = tuple[pc.Case, list[Candidate], np.ndarray, np.ndarray]


def _weights(groups: list[Group]) -> dict[str, float]:
    """Every dataset weighs as much as the largest (as fit_prompt_judge.py weighs them)."""
    counts: dict[str, int] = defaultdict(int)
    for case, *_ in groups:
        counts[case.dataset] += 1
    return {d: max(counts.values()) / n for d, n in counts.items()}


def fit_order(groups: list[Group]) -> np.ndarray:
    """Listwise weights over ORDER: softmax over a prompt's candidates against its answers.
    (A field's lead over the prompt's best would change no prompt's order.)"""
    weights, n = _weights(groups), len(ORDER)
    usable = [(weights[case.dataset], x[:, :n], y) for case, _, x, y in groups
              if case.related and y.sum() > 0]
    total = sum(w for w, _, _ in usable)
    beta = np.zeros(n)
    for _ in range(STEPS):
        grad = np.zeros(n)
        for weight, x, y in usable:
            s = x @ beta
            p = np.exp(s - s.max())
            grad += weight * (x.T @ (p / p.sum() - y / y.sum()))
        beta -= RATE * (grad / total + L2 * beta)
    return beta


def fit_gate(groups: list[Group]) -> np.ndarray:
    """Logistic weights over FIELDS (bias last): is this candidate an answer?"""
    weights = _weights(groups)
    xs = [x for _, f, x, _ in groups if f]
    ys = [y for _, f, _, y in groups if f]
    ws = [np.full(len(f), weights[case.dataset] / len(f)) for case, f, _, _ in groups if f]
    return fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(ws), 1.0)


def first(x: np.ndarray, order: np.ndarray) -> list[int]:
    return list(np.argsort(-(x[:, :len(ORDER)] @ order), kind="stable"))


def likelihood(x: np.ndarray, i: int, gate_w: np.ndarray) -> float:
    return float(1 / (1 + np.exp(-(x[i] @ gate_w[:-1] + gate_w[-1]))))


def at(order: list[int], found: list[Candidate], gold: frozenset[str], k: int) -> bool:
    return any(found[i].fragment.id in gold for i in order[:k])


def gate(groups: list[Group], order: np.ndarray, gate_w: np.ndarray, most: int, bar: float
         ) -> tuple[float, float, int]:
    """(coverage, precision, injections) when a prompt whose first candidate in the fitted
    order has a likelihood of at least `bar` gets its first `most`."""
    related = hits = injected = 0
    for case, found, x, _ in groups:
        related += case.related
        if not found:
            continue
        ranked = first(x, order)
        if likelihood(x, ranked[0], gate_w) < bar:
            continue
        injected += 1
        hits += case.related and at(ranked, found, case.gold, most)
    return hits / max(related, 1), hits / max(injected, 1), injected


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--most", type=int, default=pj.MOST)
    args = parser.parse_args(argv)
    cases = pc.load(args.cases)
    groups = prepared(cases)
    by_set: dict[str, list] = defaultdict(list)
    for g in groups:
        by_set[g[0].dataset].append(g)
    k = args.most
    print(f"\n| set | half | pool | shipped @1 / @{k} | fitted @1 / @{k} | gate @{PRECISION:.2f}: "
          "bar, coverage / precision |")
    print("|---|---|---|---|---|---|")
    for dataset, sets in sorted(by_set.items()):
        # Fitted on this set's tuning half alone: the most one model of these fields could do
        # for this kind of memory (a small set's tuning figures flatter it; held-out do not).
        tuning = [g for g in sets if g[0].half == pc.HALVES[0]]
        order, gate_w = fit_order(tuning), fit_gate(tuning)
        bars = sorted({round(likelihood(x, first(x, order)[0], gate_w), 3)
                       for _, f, x, _ in tuning if f})
        best = None
        for bar in bars:
            cov, prec, n = gate(tuning, order, gate_w, k, bar)
            if n and prec >= PRECISION and (best is None or cov > best[1]):
                best = (bar, cov)
        for half in pc.HALVES:
            rel = [g for g in sets if g[0].half == half and g[0].related]
            n = max(len(rel), 1)
            pool = sum(bool(y.sum()) for *_, y in rel) / n
            shipped = [sorted(range(len(f)), key=lambda i, f=f: -pj.probability(f[i]))
                       for _, f, _, _ in rel]
            fitted = [first(x, order) for _, _, x, _ in rel]
            s1, sk = (sum(at(o, g[1], g[0].gold, m) for o, g in zip(shipped, rel)) / n
                      for m in (1, k))
            f1, fk = (sum(at(o, g[1], g[0].gold, m) for o, g in zip(fitted, rel)) / n
                      for m in (1, k))
            if best is None:
                gated = "none reaches it"
            else:
                cov, prec, _ = gate([g for g in sets if g[0].half == half], order, gate_w,
                                    k, best[0])
                gated = f"{best[0]:.2f}, {cov:.3f} / {prec:.3f}"
            print(f"| {dataset} | {half} | {pool:.3f} | {s1:.3f} / {sk:.3f} | "
                  f"{f1:.3f} / {fk:.3f} | {gated} |")


if __name__ == "__main__":
    main()
