"""Retrieval-quality benchmark (design §10): Recall@k of Lore's query engine on LoCoMo and on
the seed peer's 50-document corpus, next to plain BM25, plain MiniLM and published anchors.

    python bench/bench_recall.py [LOCOMO_JSON] [PEER_JSON] [--limit-conversations N]
                                 [--json PATH] [--modes hybrid keyword vector]
                                 [--only locomo|peer|peer-tool|paraphrase|newuser]

Every query goes through `Memory.search` (the engine behind query_memory) at the depth of
the items being judged: mode "hybrid" is Lore, "keyword" is FTS5/BM25 alone, "vector" is
all-MiniLM-L6-v2 cosine alone. Embeddings of stored texts are cached per dataset in
bench/.cache/recall-<dataset>/embeddings.sqlite and the built databases next to them, so a
rerun embeds only the queries.

Recall@k of one question = |gold items in the top k| / |gold items|; the tables show its mean
over questions (questions without gold items are skipped). This is the definition of the
LoCoMo paper's retrieval table and of the peer's benchmark.

How the data becomes memory:
- LoCoMo: one topic per conversation ("Conversations between A and B"), one concept per
  session ("A and B talking on 8 May 2023", created_at = the session date), and every dialogue
  turn a fact under its session (summary "Speaker: text", plus "[shares a photo: caption]" when
  the turn shared an image; created_at = the session date). As ingestion does, consecutive
  siblings (turns of a session, documents of a project by date) are chained by temporal
  edges. Each conversation is its own
  database, as in the paper, and "now" is the day after its last session. Gold = evidence
  dia_ids. Categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
- Peer corpus: one topic per project (the title's first field), every document a concept under
  it (summary = its first sentence, content = its text, created_at = its event_date). "Now" is
  the day after the newest document.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import blind_cues  # noqa: E402
import newuser  # noqa: E402
import numpy as np  # noqa: E402
import paraphrase  # noqa: E402
import recall_tool  # noqa: E402
from common import ROOT, machine, table, write_json  # noqa: E402

from lore_plugin.core.types import NewFragment  # noqa: E402
from lore_plugin.embedding.embedder import MODEL_NAME, LocalEmbedder, to_blob  # noqa: E402
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors  # noqa: E402
from lore_plugin.recall.memory import Memory, embedding_text  # noqa: E402
from lore_plugin.store import Store  # noqa: E402
from lore_plugin.store.schema import SCHEMA_VERSION  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
DATA = Path("/work/shared/bench-data")
DEFAULT_LOCOMO = DATA / "locomo10.json"
DEFAULT_PEER = DATA / "claude-memory-corpus.json"
PROVISIONAL = False  # --provisional
LAYOUT_VERSION = 2  # bump when the data → memory mapping changes, to rebuild cached databases
DAY = 86400.0
KS = (1, 5, 10, 25)
MODES = ("hybrid", "query", "keyword", "vector")
MODE_NAMES = {"hybrid": "Lore hybrid", "query": "Lore query_memory", "keyword": "BM25 (FTS5)",
              "vector": "MiniLM"}
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}
# Published anchors: LoCoMo paper (Maharana et al. 2024), DRAGON retriever over dialogue
# turns; the claude-memory peer's own benchmark of its hybrid search.
ANCHORS = {"locomo": {"DRAGON (paper)": {5: 0.567, 10: 0.662}},
           "peer": {"claude-memory (published)": {5: 0.680, 10: 0.777}},
           "peer-tool": {}, "paraphrase": {}, "newuser": {}}
DATASETS = ("locomo", "peer", "peer-tool", "paraphrase", "newuser")


# -- datasets as memory ------------------------------------------------------------------------
@dataclass
class Node:
    key: str
    depth: int
    summary: str
    content: str
    created_at: float
    parent: str | None = None


@dataclass
class Question:
    text: str
    gold: frozenset[str]
    category: str


@dataclass
class Corpus:
    """One database's worth of memory and the questions asked of it."""

    name: str
    nodes: list[Node]
    questions: list[Question]
    depth: int  # the depth of the judged items
    now: float
    dropped_gold: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def _ts(dt: datetime) -> float:
    return dt.replace(tzinfo=UTC).timestamp()


def _session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


_DIA = re.compile(r"D:?(\d+):(\d+)")


def _evidence(raw: Iterable[str]) -> set[str]:
    """Normalises LoCoMo's evidence strings ("D1:3", "D8:6; D9:17", "D30:05")."""
    return {f"D{int(a)}:{int(b)}" for item in raw for a, b in _DIA.findall(str(item))}


def load_locomo(path: Path, limit: int | None = None) -> list[Corpus]:
    out = []
    for index, sample in enumerate(json.loads(path.read_text())[:limit]):
        conv = sample["conversation"]
        a, b = conv["speaker_a"], conv["speaker_b"]
        topic = Node("topic", 0, f"Conversations between {a} and {b}",
                     f"Everyday conversations between {a} and {b}.", 0.0)
        nodes, last = [topic], 0.0
        sessions = sorted((int(k.split("_")[1]), v) for k, v in conv.items()
                          if re.fullmatch(r"session_\d+", k) and v)
        for number, turns in sessions:
            when = _ts(_session_time(conv[f"session_{number}_date_time"]))
            last = max(last, when)
            day = datetime.fromtimestamp(when, UTC).strftime("%-d %B %Y")
            nodes.append(Node(f"S{number}", 1, f"{a} and {b} talking on {day}",
                              f"Session {number} of the conversations between {a} and {b}.",
                              when, "topic"))
            for turn in turns:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                dia = "D{}:{}".format(*map(int, _DIA.findall(turn["dia_id"])[0]))
                nodes.append(Node(dia, 2, text, text, when, f"S{number}"))
        topic.created_at = min(n.created_at for n in nodes[1:])
        keys = {n.key for n in nodes}
        questions, dropped = [], 0
        for qa in sample["qa"]:
            gold = _evidence(qa.get("evidence", []))
            dropped += len(gold - keys)
            if gold & keys:
                questions.append(Question(qa["question"], frozenset(gold & keys),
                                          LOCOMO_CATEGORIES.get(qa["category"], str(qa["category"]))))
        out.append(Corpus(f"locomo-{index}-{sample.get('sample_id', index)}", nodes, questions,
                          2, last + DAY, dropped))
    return out


def load_peer(path: Path) -> Corpus:
    data = json.loads(path.read_text())
    nodes: list[Node] = []
    topics: dict[str, Node] = {}
    for doc in data["documents"]:
        when = _ts(datetime.strptime(doc["event_date"], "%Y-%m-%d"))
        project = doc.get("title", "").split("|")[0].strip() or "notes"
        if project not in topics:
            topics[project] = Node(f"project:{project}", 0, project,
                                   f"Work on the {project} project.", when)
            nodes.append(topics[project])
        topics[project].created_at = min(topics[project].created_at, when)
        first = re.split(r"(?<=[.!?])\s+", doc["content"].strip(), maxsplit=1)[0]
        nodes.append(Node(doc["id"], 1, first.rstrip("."), doc["content"], when,
                          f"project:{project}"))
    questions = [Question(q["query"], frozenset(q["relevant_ids"]), q["category"])
                 for q in data["queries"]]
    newest = max(n.created_at for n in nodes)
    return Corpus("peer", nodes, questions, 1, newest + DAY)


def load_paraphrase(path: Path = paraphrase.DEFAULT_PARAPHRASE) -> Corpus:
    """The hand-written paraphrase set, its tree as stored, judged at the depth of its facts.
    Facts are dated on days of 2025 in a shuffled order (seeded), so that recency favours no
    kind of note: in file order the distractors, written last, would all be the newest."""
    data = paraphrase.load(path)
    start = _ts(datetime(2025, 1, 1))
    days = list(range(len(data["fragments"])))
    random.Random(16).shuffle(days)
    nodes = [Node(f["key"], f["depth"], f["summary"], f["content"],
                  start + (day if f["depth"] == 2 else 0) * DAY, f["parent"])
             for f, day in zip(data["fragments"], days)]
    questions = [Question(q["query"], frozenset([q["target"]]), q["category"])
                 for q in data["queries"]]
    return Corpus("paraphrase", nodes, questions, 2, start + (len(nodes) + 1) * DAY)


def load_newuser(path: Path = newuser.DEFAULT_NEWUSER) -> Corpus:
    """The blind "new user" set: its notes as facts with no tree (placement makes it when
    they are stored: prompt_cases.store_placed), each created on its day; the related
    prompts as questions (category = kind). meta: "projects", note key -> the project it was
    stored in; "unrelated", the prompts no note answers; "asked_from", prompt -> the project
    of the session asking it (newuser.asked_from). "Now" is the day after the newest note."""
    data = newuser.load(path)
    nodes = [Node(n["id"], 2, n["summary"], n["content"],
                  _ts(datetime.strptime(n["date"], "%Y-%m-%d"))) for n in data["notes"]]
    questions = [Question(q["prompt"], frozenset([q["answer"]]), q["kind"])
                 for q in data["related"]]
    meta = {"projects": {n["id"]: n["project"] for n in data["notes"]},
            "unrelated": [Question(q["prompt"], frozenset(), "unrelated")
                          for q in data["unrelated"]],
            "asked_from": newuser.asked_from(data)}
    return Corpus("newuser", nodes, questions, 2, max(n.created_at for n in nodes) + DAY,
                  meta=meta)


# -- embedding cache and database build ----------------------------------------------------------
class CachedEmbedder:
    """Embeds stored texts once per dataset; vectors persist in a small SQLite file."""

    def __init__(self, model: LocalEmbedder, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.model = model
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB)")

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        have: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            rows = self.db.execute(
                f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(chunk))})", chunk)
            have.update(rows)
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in have}.items())
        if missing:
            vectors = self.model.embed([t for _, t in missing])
            self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)",
                                [(k, to_blob(v)) for (k, _), v in zip(missing, vectors)])
            self.db.commit()
            have.update((k, to_blob(v)) for (k, _), v in zip(missing, vectors))
        return np.stack([np.frombuffer(have[k], dtype="<f4") for k in keys])


def build_database(corpus: Corpus, folder: Path, embedder: CachedEmbedder) -> tuple[Path, dict[str, str]]:
    """Returns the database path and a map fragment id → item key. A cached database is reused
    when the layout, the texts, the embedding text and the schema are unchanged."""
    by_key = {n.key: n for n in corpus.nodes}
    texts = [embedding_text(n.summary, n.content,
                            by_key[n.parent].summary if n.parent and not PROVISIONAL else None)
             for n in corpus.nodes]
    cues = [blind_cues.of(corpus.name, n.key) for n in corpus.nodes]  # --cues
    finger = hashlib.sha256(json.dumps(
        [LAYOUT_VERSION, SCHEMA_VERSION, MODEL_NAME, corpus.now,
         [(n.key, n.depth, n.summary, n.content, n.created_at, n.parent) for n in corpus.nodes],
         texts] + ([cues] if any(cues) else [])).encode()).hexdigest()[:16]
    db_path = folder / f"{corpus.name}-{finger}.db"
    ids = {hashlib.sha256(f"{corpus.name}/{n.key}".encode()).hexdigest()[:32]: n.key
           for n in corpus.nodes}
    if db_path.exists():
        return db_path, ids
    for stale in folder.glob(f"{corpus.name}-*.db*"):
        stale.unlink()
    vectors = embedder.embed(texts)
    tmp = db_path.with_suffix(".tmp")
    for leftover in folder.glob(tmp.name + "*"):
        leftover.unlink()
    store = Store(tmp)
    fid = {key: fid for fid, key in ids.items()}
    with store.write():
        for node, vector, cue in zip(corpus.nodes, vectors, cues):
            new = NewFragment(content=node.content, summary=node.summary, depth=node.depth,
                              importance=0.5, created_at=node.created_at, id=fid[node.key],
                              metadata={"key": node.key}, cues=cue)
            store.insert(new, corpus.now, to_blob(vector), fid[node.parent] if node.parent else None)
        # Like ingestion: siblings are chained by temporal edges in the order they happened.
        siblings: dict[str, list[Node]] = {}
        for node in corpus.nodes:
            if node.parent:
                siblings.setdefault(node.parent, []).append(node)
        for group in siblings.values():
            group.sort(key=lambda n: n.created_at)  # stable: turns keep their order
            for earlier, later in zip(group, group[1:]):
                store.link(fid[earlier.key], fid[later.key], "temporal", 1.0, corpus.now)
    fill_cue_vectors(store, embedder)  # --cues: as the memory service does after a store
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    tmp.rename(db_path)
    return db_path, ids


# -- evaluation ---------------------------------------------------------------------------------
@dataclass
class ModeResult:
    recalls: dict[str, list[dict[int, float]]] = field(default_factory=dict)  # category → per-q
    ranks: dict[str, list[float]] = field(default_factory=dict)  # category → reciprocal ranks
    latencies: list[float] = field(default_factory=list)


def evaluate(corpus: Corpus, db_path: Path, ids: dict[str, str], model: LocalEmbedder,
             modes: Sequence[str], results: dict[str, ModeResult]) -> None:
    memory = Memory(db_path, model, clock=lambda: corpus.now, tz=UTC)  # dates were stored as UTC
    try:
        for mode in modes:
            res = results.setdefault(mode, ModeResult())
            memory.search("warm up", limit=1, depth=corpus.depth, mode=mode if mode != "query" else "hybrid")
            for q in corpus.questions:
                if "asked_from" in corpus.meta:  # the asking session's project (newuser)
                    memory.project = corpus.meta["asked_from"].get(q.text)
                start = time.perf_counter()
                if mode == "query":  # the query_memory tool's path: branches at a depth
                    hits = memory.query(q.text, depth=corpus.depth, limit=max(KS), reinforce=False)
                else:
                    hits = memory.search(q.text, limit=max(KS), depth=corpus.depth, mode=mode)
                res.latencies.append((time.perf_counter() - start) * 1000)
                ranked = [ids.get(h.fragment.id) for h in hits.fragments]
                res.recalls.setdefault(q.category, []).append(
                    {k: len(q.gold & set(ranked[:k])) / len(q.gold) for k in KS})
                first = next((i for i, key in enumerate(ranked, 1) if key in q.gold), None)
                res.ranks.setdefault(q.category, []).append(1 / first if first else 0.0)
    finally:
        memory.close()


def summarise(results: dict[str, ModeResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, res in results.items():
        every = [r for rows in res.recalls.values() for r in rows]
        cats = {cat: {"n": len(rows), **{f"R@{k}": _mean(r[k] for r in rows) for k in KS},
                      "MRR": _mean(res.ranks[cat])}
                for cat, rows in sorted(res.recalls.items())}
        out[mode] = {"overall": {"n": len(every), **{f"R@{k}": _mean(r[k] for r in every)
                                                     for k in KS},
                                 "MRR": _mean(r for rows in res.ranks.values() for r in rows)},
                     "categories": cats,
                     "latency_ms": {"p50": statistics.median(res.latencies),
                                    "p95": _pct(res.latencies, 95)}}
    return out


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return round(sum(vals) / len(vals), 4) if vals else 0.0


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def run_peer_tool(path: Path, model: LocalEmbedder, modes: Sequence[str]) -> dict[str, Any]:
    """The peer corpus stored one note at a time through store_memory (recall_tool.py), every
    mode asked of that same memory at the depth of the notes."""
    folder = CACHE / "recall-peer-tool"
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    start = time.perf_counter()
    now = recall_tool.peer_now(path)
    db_path = folder / "peer-tool.db"
    ids = recall_tool.store_one_by_one(path, db_path, embedder, now)
    peer = load_peer(path)
    corpus = Corpus("peer-tool", [], peer.questions, 1, now)
    results: dict[str, ModeResult] = {}
    evaluate(corpus, db_path, ids, model, modes, results)
    summary = summarise(results)
    summary["_meta"] = {"databases": 1, "fragments": len(ids), "questions": len(peer.questions),
                        "gold_ids_dropped": 0, "seconds": round(time.perf_counter() - start, 1)}
    return summary


def run_newuser(model: LocalEmbedder, modes: Sequence[str]) -> dict[str, Any]:
    """The blind "new user" set stored as bench_prompt_recall.py stores it (every note through
    store_memory's path, on its day, in its project: prompt_cases.store_placed), every mode
    asked from each prompt's project (newuser.asked_from) at the depth of the notes."""
    import prompt_cases  # it imports this module: here, not at the top

    folder = CACHE / "recall-newuser"
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    start = time.perf_counter()
    corpus = load_newuser()
    db_path = folder / "newuser.db"
    ids = prompt_cases.store_placed(corpus, db_path, embedder, projects=corpus.meta["projects"])
    results: dict[str, ModeResult] = {}
    evaluate(corpus, db_path, ids, model, modes, results)
    summary = summarise(results)
    summary["_meta"] = {"databases": 1, "fragments": len(ids), "questions": len(corpus.questions),
                        "gold_ids_dropped": 0, "seconds": round(time.perf_counter() - start, 1)}
    return summary


def run_dataset(name: str, corpora: list[Corpus], model: LocalEmbedder,
                modes: Sequence[str]) -> dict[str, Any]:
    folder = CACHE / f"recall-{name}"
    embedder = CachedEmbedder(model, folder / "embeddings.sqlite")
    results: dict[str, ModeResult] = {}
    start = time.perf_counter()
    for corpus in corpora:
        db_path, ids = build_database(corpus, folder, embedder)
        evaluate(corpus, db_path, ids, model, modes, results)
    summary = summarise(results)
    summary["_meta"] = {"databases": len(corpora),
                        "fragments": sum(len(c.nodes) for c in corpora),
                        "questions": sum(len(c.questions) for c in corpora),
                        "gold_ids_dropped": sum(c.dropped_gold for c in corpora),
                        "seconds": round(time.perf_counter() - start, 1)}
    return summary


# -- tables -------------------------------------------------------------------------------------
def report(name: str, summary: dict[str, Any], ks: Sequence[int],
           per_category: Sequence[str] = ("R@5", "R@10")) -> str:
    modes = [m for m in MODES if m in summary]
    rows: list[list[Any]] = []
    for mode in modes:
        o = summary[mode]["overall"]
        rows.append([MODE_NAMES[mode], *[f"{o[f'R@{k}']:.3f}" for k in ks], f"{o['MRR']:.3f}",
                     f"{summary[mode]['latency_ms']['p50']:.1f}"])
    for anchor, vals in ANCHORS[name].items():
        rows.append([anchor, *[f"{vals[k]:.3f}" if k in vals else "-" for k in ks], "-", "-"])
    meta = summary["_meta"]
    title = (f"{name}: {meta['questions']} questions over {meta['fragments']} fragments in "
             f"{meta['databases']} database(s); mean Recall@k of the gold items")
    out = [table(title, ["mode", *[f"R@{k}" for k in ks], "MRR", "p50 ms"], rows)]
    cats = list(summary[modes[0]]["categories"]) if modes else []
    crow = []
    for cat in cats:
        cells = [summary[m]["categories"][cat] for m in modes]
        crow.append([f"{cat} ({cells[0]['n']})",
                     *[" / ".join(f"{c[f]:.3f}" for f in per_category) for c in cells]])
    out.append(table(f"{name} by category, {' / '.join(per_category)}",
                     ["category", *[MODE_NAMES[m] for m in modes]], crow))
    return "\n".join(out)


def shortfalls(name: str, summary: dict[str, Any], slack: float = 0.02) -> list[str]:
    """Categories where a Lore mode's R@5 falls more than `slack` below the better of BM25 and
    MiniLM alone (issue 16's target for every benchmark)."""
    if "keyword" not in summary or "vector" not in summary:
        return []
    out = []
    for mode in ("hybrid", "query"):
        for cat, cell in summary.get(mode, {}).get("categories", {}).items():
            best = max(summary[m]["categories"][cat]["R@5"] for m in ("keyword", "vector"))
            if cell["R@5"] < best - slack:
                out.append(f"{name}/{cat}: {MODE_NAMES[mode]} R@5 {cell['R@5']:.3f} < "
                           f"{best:.3f} - {slack}")
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", nargs="?", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("peer", nargs="?", type=Path, default=DEFAULT_PEER)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--paraphrase", type=Path, default=paraphrase.DEFAULT_PARAPHRASE)
    parser.add_argument("--only", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--cues", type=Path, nargs="+", default=None,
                        help="give the notes the cues of these files (bench/data/blind_cues.json, "
                             "bench/data/locomo_cues.json), stored beside them as extraction or "
                             "store_memory would")
    parser.add_argument("--provisional", action="store_true",
                        help="embed every fragment without its parent's summary: the vector a "
                             "placed store_memory fact holds until its recontext (the worst case)")
    args = parser.parse_args(argv)
    global PROVISIONAL
    PROVISIONAL = args.provisional
    if args.cues:
        print(f"cues for {blind_cues.use(args.cues)} notes from "
              f"{', '.join(map(str, args.cues))}")
    model = LocalEmbedder(CACHE / "models")
    if not model.available:
        sys.exit(f"the embedding model is unavailable: {model.failure}")
    results: dict[str, Any] = {}
    if "locomo" in args.only:
        corpora = load_locomo(args.locomo, args.limit_conversations)
        results["locomo"] = run_dataset("locomo", corpora, model, args.modes)
        print(report("locomo", results["locomo"], KS))
    if "peer" in args.only:
        results["peer"] = run_dataset("peer", [load_peer(args.peer)], model, args.modes)
        print(report("peer", results["peer"], (5, 10)))
    if "peer-tool" in args.only:
        results["peer-tool"] = run_peer_tool(args.peer, model, args.modes)
        print(report("peer-tool", results["peer-tool"], (5, 10)))
    if "paraphrase" in args.only:
        broken = paraphrase.problems(paraphrase.load(args.paraphrase))
        if broken:
            sys.exit("the paraphrase set breaks its rules:\n" + "\n".join(broken))
        results["paraphrase"] = run_dataset("paraphrase", [load_paraphrase(args.paraphrase)],
                                            model, args.modes)
        print(report("paraphrase", results["paraphrase"], (1, 5, 10), ("R@1", "R@5", "MRR")))
    if "newuser" in args.only:
        broken = newuser.problems(newuser.load())
        if broken:
            sys.exit("the newuser set breaks its rules:\n" + "\n".join(broken))
        results["newuser"] = run_newuser(model, args.modes)
        print(report("newuser", results["newuser"], (1, 5, 10), ("R@1", "R@5", "MRR")))
    missed = [line for name, summary in results.items() for line in shortfalls(name, summary)]
    print("\nR@5 within 0.02 of the better single signal in every category:",
          "yes" if not missed else "no\n  " + "\n  ".join(missed))
    write_json(str(args.json) if args.json else None, "recall", results)
    return {"machine": machine(), **results}


if __name__ == "__main__":
    main()
