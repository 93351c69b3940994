"""What consolidation's heading naming (consolidation/heading_naming.py) costs on the tree
Lore's placement builds for a corpus stored one note at a time (placed_tree.py's): how many
placed headings are due, how many LLM calls and how large a prompt they take, and the cycle's
time with the phase (the LLM faked at its seam, answering at once with a changed name, so
the time is Lore's own: prompts, the model re-embedding each renamed heading's children,
the writes). Each run consolidates a fresh copy of the same tree with the real model.
`--root` runs another checkout's code (a base without the phase, to compare with).

    python bench/heading_naming.py [--set paraphrase|peer] [--runs 3] [--root /tmp/base-X]
                                   [--project /home/dev/orchard]"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path


def namer(calls: list[int]):
    """Renames each heading to its first two words + "notes", and says nothing to the other
    phases: what a model's answer costs Lore, not the model."""
    def answer(*, system, prompt, tool, max_tokens):
        if tool["name"] == "report_contradictions":
            return {"contradictions": []}
        if tool["name"] == "record_topic_descriptions":
            return {"descriptions": []}
        calls.append(len(system) + len(prompt))
        shown = re.findall(r"^Heading (h\d+): (.*)$", prompt, re.MULTILINE)
        return {"names": [{"id": i, "name": " ".join([*old.split()[:2], "notes"])}
                          for i, old in shown]}
    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=("paraphrase", "peer"), default="paraphrase")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--project", help="the memory's project while storing")
    args = parser.parse_args()
    if args.root:
        sys.path.insert(0, str(args.root))
    from lore_plugin.consolidation.cycle import consolidate
    from lore_plugin.core.config import Settings
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.llm.client import FakeLLM
    from lore_plugin.store import Store

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import prompt_cases as pc
    from bench_recall import CACHE, DEFAULT_PEER, CachedEmbedder, load_paraphrase, load_peer

    print(f"Lore: {sys.modules['lore_plugin'].__file__}")
    corpus = load_paraphrase() if args.set == "paraphrase" else load_peer(DEFAULT_PEER)
    folder = CACHE / ("recall-paraphrase" if args.set == "paraphrase" else "recall-peer")
    model = LocalEmbedder(CACHE / "models")
    work = Path(tempfile.mkdtemp())
    tree = work / "placed.db"
    cached = CachedEmbedder(model, folder / "embeddings.sqlite")
    if args.project:
        pc.store_placed(corpus, tree, cached, project=args.project)
    else:
        pc.store_placed(corpus, tree, cached)
    model.embed(["warm the model up"])  # loaded once, not inside the first run's phase
    seconds, phase_seconds = [], []
    for run in range(args.runs):
        db = work / f"run{run}.db"
        with sqlite3.connect(tree) as source, sqlite3.connect(db) as copy:
            source.backup(copy)
        store, calls = Store(db), []
        clock = lambda: corpus.now + 86400.0  # noqa: E731 - a day after the last note
        report = consolidate(Settings(db_path=db, home=work / "home"), store, clock,
                             FakeLLM(default=namer(calls)), model)
        store.close()
        seconds.append(report["duration_s"])
        phase = report["phases"].get("heading_names")
        if phase is None:
            print(f"run {run}: cycle {report['duration_s']:.3f} s (no heading names phase)")
            continue
        phase_seconds.append(phase["seconds"])
        print(f"run {run}: cycle {report['duration_s']:.3f} s, heading names "
              f"{phase['seconds']:.3f} s: {phase['due']} due, {phase['done']} renamed, "
              f"{phase['rejected']} refused, {phase['calls']} calls, prompt chars "
              f"median {statistics.median(calls) if calls else 0:.0f} max "
              f"{max(calls, default=0)}" + (f", stopped: {phase['stopped']}"
                                            if phase.get("stopped") else ""))
    print(f"median cycle {statistics.median(seconds):.3f} s over {len(seconds)} runs"
          + (f"; heading names phase median {statistics.median(phase_seconds):.3f} s"
             if phase_seconds else ""))


if __name__ == "__main__":
    main()
