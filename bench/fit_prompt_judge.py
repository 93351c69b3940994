"""Fits the per-prompt judge's logistic model (lore_plugin/recall/prompt_judge.py, issue 30)
on the tuning half of bench_prompt_recall.py's cases, and prints the constants to commit.

    python bench/fit_prompt_judge.py --cases PKL [--l2 1.0]

Each candidate a prompt gets (the hook's CANDIDATES first search hits, headings replaced by
their children) is one example: its features (prompt_judge.features, all but the closest cue,
whose weight bench_prompt_recall.py chooses with these held) and whether it is a gold item.
A prompt asked of a memory that cannot answer it gives only negatives. Every dataset weighs
as much as LoCoMo's related prompts in the fit (its prompts are weighted up), so that the peer
notes and the paraphrases, the kind of memory a coding user has, are not drowned by LoCoMo's
chat. The held-out half is never read here.

The fit is Newton's method on the L2-penalised log-likelihood (numpy only: a few features,
some 40,000 examples, a dozen steps)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompt_cases as pc  # noqa: E402

from lore_plugin.recall import prompt_judge as pj  # noqa: E402

FITTED = len(pj.FEATURES) - 1  # the closest cue last, not fitted here


def examples(cases: list[pc.Case], variant: tuple[int, int, int] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`variant`: (search hits, children, rare-word hits) read from the pool
    (prompt_cases.select); None: the candidates the checkout's defaults gave."""
    per_dataset: dict[str, int] = {}
    for case in cases:
        per_dataset[case.dataset] = per_dataset.get(case.dataset, 0) + 1
    biggest = max(per_dataset.values())
    xs, ys, ws = [], [], []
    for case in cases:
        found = case.found if variant is None else pc.select(case.wide, *variant)
        weight = biggest / per_dataset[case.dataset] / max(len(found), 1)
        for c in pj.answered(found):
            xs.append(pj.features(c)[:FITTED])
            ys.append(float(c.fragment.id in case.gold))
            ws.append(weight)
    return np.array(xs), np.array(ys), np.array(ws)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float, steps: int = 25
        ) -> np.ndarray:
    """Weights, bias last."""
    a = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(a.shape[1])
    penalty = np.full(a.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(a @ beta)))
        grad = a.T @ (w * (p - y)) + penalty * beta
        hess = (a * (w * p * (1 - p))[:, None]).T @ a + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def main(argv: list[str] | None = None) -> np.ndarray:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--variant", type=int, nargs=3, metavar=("HITS", "CHILDREN", "RARE"),
                        help="fit on these candidates read from the pool (prompt_cases.select)")
    args = parser.parse_args(argv)
    tuning = [c for c in pc.load(args.cases) if c.half == pc.HALVES[0]]
    x, y, w = examples(tuning, tuple(args.variant) if args.variant else None)
    beta = fit(x, y, w, args.l2)
    print(f"{len(y)} candidates, {int(y.sum())} gold, from {len(tuning)} tuning prompts")
    print("WEIGHTS = (" + ", ".join(f"{b:.3f}" for b in beta[:-1]) + ", CUE_WEIGHT)  # "
          + ", ".join(pj.FEATURES))
    print(f"BIAS = {beta[-1]:.3f}")
    return beta


if __name__ == "__main__":
    main()
