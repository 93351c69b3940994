"""The tree Lore's placement builds for a corpus stored one note at a time through
store_memory (prompt_cases.store_placed, as bench_prompt_recall.py's paraphrase-tool and
peer-placed sets): live fragments by depth, the biggest branches, and how many concepts hold
a single note, and the time the stores took. `--root` runs another checkout's code (a base to compare with).

    python bench/placed_tree.py [--set paraphrase|peer|newuser] [--branches 8] [--root /tmp/base-X]
                                [--project /home/dev/orchard]

`--project` stores as a session in that project does (memory.project set: the notes go under
"Project <name>", as bench_prompt_recall.py's "-project" sets). The newuser set is always
stored each note in its own project (its "project" field), as bench_prompt_recall.py does."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=("paraphrase", "peer", "newuser"), default="paraphrase")
    parser.add_argument("--branches", type=int, default=8)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--project", help="the memory's project while storing")
    args = parser.parse_args()
    if args.root:
        sys.path.insert(0, str(args.root))
    # Lore first: bench_recall puts this checkout's root on the path when it is imported.
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory import Memory

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import prompt_cases as pc
    from bench_recall import (
        CACHE,
        DEFAULT_PEER,
        CachedEmbedder,
        load_newuser,
        load_paraphrase,
        load_peer,
    )

    print(f"Lore: {sys.modules['lore_plugin'].__file__}")

    corpus = {"paraphrase": load_paraphrase, "peer": lambda: load_peer(DEFAULT_PEER),
              "newuser": load_newuser}[args.set]()
    folder = CACHE / f"recall-{args.set}"
    embedder = CachedEmbedder(LocalEmbedder(CACHE / "models"), folder / "embeddings.sqlite")
    db = Path(tempfile.mkdtemp()) / "placed.db"
    began = time.perf_counter()
    projects = corpus.meta.get("projects")  # newuser: each note's own
    stored = len(pc.store_placed(corpus, db, embedder, project=args.project, projects=projects)
                 if args.project or projects else pc.store_placed(corpus, db, embedder))
    took = time.perf_counter() - began
    memory = Memory(db, None)
    try:
        rows = memory.reader.execute("SELECT id, depth, summary, project FROM fragments "
                                     "WHERE superseded_by IS NULL")
        depth = {fid: d for fid, d, _, _ in rows}
        summary = {fid: s for fid, _, s, _ in rows}
        project = {fid: p for fid, _, _, p in rows}
        children: dict[str, list[str]] = {}
        for source, target in memory.reader.execute(
                "SELECT source, target FROM edges WHERE kind = 'hierarchical'"):
            if source in depth and target in depth:
                children.setdefault(source, []).append(target)
    finally:
        memory.close()
    print(f"{stored} notes stored in {took:.2f} s, {took * 1000 / stored:.1f} ms a store "
          "(vectors from the bench's cache: placement and writes, little of the model)")
    print(f"{args.set}: live fragments by depth {dict(sorted(Counter(depth.values()).items()))}")
    facts = {c: len(children.get(c, [])) for c, d in depth.items() if d == 1}
    print(f"concepts holding one note: {sum(n == 1 for n in facts.values())} of {len(facts)}")
    topics = sorted((t for t, d in depth.items() if d == 0), key=lambda t: -len(children.get(t, [])))
    for topic in topics[:args.branches]:
        print(f"- {summary[topic][:70]!r} ({len(children.get(topic, []))} concepts)")
        for concept in sorted(children.get(topic, []), key=lambda c: -facts.get(c, 0))[:args.branches]:
            first = children.get(concept, [])
            example = f", e.g. {summary[first[0]][:60]!r}" if first else ""
            print(f"    - {summary[concept][:60]!r} ({facts.get(concept, 0)} notes{example})")
    if len(topics) > args.branches:
        print(f"  … {len(topics) - args.branches} more topics")
    _by_project(depth, summary, project, children, facts)


def _by_project(depth: dict[str, int], summary: dict[str, str], project: dict[str, str | None],
                children: dict[str, list[str]], facts: dict[str, int]) -> None:
    """How the tree keeps projects apart: notes under a topic of another project than the
    one they were stored in, and what the biggest concept holds, by project."""
    parent = {child: source for source, kids in children.items() for child in kids}

    def topic(fid: str) -> str:
        while fid in parent:
            fid = parent[fid]
        return fid

    notes = [f for f, d in depth.items() if d == max(depth.values())]
    strays = [n for n in notes if project[topic(n)] != project[n]]
    print(f"notes under another project's topic: {len(strays)} of {len(notes)} "
          f"{dict(Counter(_short(project[n]) for n in strays))}")
    if facts:
        big = max(facts, key=lambda c: facts[c])
        held = Counter(_short(project[n]) for n in children.get(big, []))
        print(f"biggest concept: {summary[big]!r} under {summary[topic(big)]!r}, "
              f"{facts[big]} notes {dict(held)}")


def _short(project: str | None) -> str:
    return project.rstrip("/").rsplit("/", 1)[-1] if project else "general"


if __name__ == "__main__":
    main()
