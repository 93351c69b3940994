"""The paraphrase set (bench/data/paraphrase.json): queries that share no content word with the
note they look for, each with a near-miss distractor that shares the query's words but not its
meaning. `problems` checks both properties with the tokenizer Lore's keyword search uses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from common import ROOT

from lore_plugin.recall.terms import fts_expression

DEFAULT_PARAPHRASE = ROOT / "bench" / "data" / "paraphrase.json"
# The tokenizer of fragments_fts (lore_plugin/store/schema.py): a query term matches a text here
# exactly when Lore's BM25 would count it.
TOKENIZER = "porter unicode61"


def load(path: Path = DEFAULT_PARAPHRASE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def problems(data: dict[str, Any]) -> list[str]:
    """Every way the set breaks its own rules: a query with a content word (after Lore's
    stopwords and porter stemming) in its target's summary or content, a distractor that
    shares none, or a key that names no fragment."""
    frags = {f["key"]: f for f in data["fragments"]}
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(key UNINDEXED, text, tokenize='{TOKENIZER}')")
    db.executemany("INSERT INTO t VALUES (?, ?)",
                   [(k, f"{f['summary']}\n{f['content']}") for k, f in frags.items()])
    out = []
    for q in data["queries"]:
        missing = [k for k in (q["target"], q["distractor"]) if k not in frags]
        if missing:
            out.append(f"{q['query']!r}: unknown key(s) {missing}")
            continue
        expr = fts_expression(q["query"])
        if expr is None:
            out.append(f"{q['query']!r}: no content word at all")
            continue
        hits = {k for (k,) in db.execute("SELECT key FROM t WHERE t MATCH ?", (expr,))}
        if q["target"] in hits:
            shared = [term for term in expr.split(" OR ")
                      if db.execute("SELECT 1 FROM t WHERE key = ? AND t MATCH ?",
                                    (q["target"], term)).fetchone()]
            out.append(f"{q['query']!r} shares {', '.join(shared)} with {q['target']}")
        if q["distractor"] not in hits:
            out.append(f"{q['query']!r}: its distractor {q['distractor']} shares no word")
    db.close()
    return out
