"""What the embedding model costs a fresh process: imports, session load and RSS, for the model
folder as shipped and for the optimised copy that `lore prepare` writes, next to the import of
fastembed that Lore no longer needs for a local model.

    python bench/bench_model.py [--runs 5] [--json bench/results/model.json]

Each measurement runs in its own `python -c` process (so nothing is warm but the page cache),
embeds one short query, and reports the median over --runs processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from common import ROOT, table, write_json

from lore_plugin.embedding.embedder import LocalEmbedder, find_model_dir, optimized_model

CACHE = ROOT / "bench" / ".cache"
PROBE = """
import json, sys, time
def rss():
    s = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
    return int(s["VmRSS"].split()[0]) / 1024, int(s["VmHWM"].split()[0]) / 1024
import numpy
base = rss()[0]
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
{load}
t2 = time.perf_counter()
{embed}
now, peak = rss()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "rss_mb": now - base,
                  "peak_mb": peak - base}}))
"""
LOCAL = dict(imports="from lore_plugin.embedding.embedder import OnnxSentenceModel\nfrom pathlib import Path",
             embed="model.embed(['retry policy timeouts'], batch_size=1)")


def probe(code: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    if done.returncode:
        sys.exit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()

    models = CACHE / "models"
    if not LocalEmbedder(models).available:
        sys.exit("the embedding model is needed")
    folder = find_model_dir(models)
    assert folder is not None
    optimised = optimized_model(folder / "model.onnx", models)
    cases = {
        "fastembed import only": PROBE.format(imports="import fastembed", load="", embed=""),
        "model as shipped": PROBE.format(
            load=f"model = OnnxSentenceModel(Path({str(folder)!r}), 1)", **LOCAL),
        "optimised copy (lore prepare)": PROBE.format(
            load=f"model = OnnxSentenceModel(Path({str(folder)!r}), 1, "
                 f"Path({str(optimised.parent.parent.parent)!r}))", **LOCAL),
    }
    results = {}
    for name, code in cases.items():
        runs = [probe(code) for _ in range(args.runs)]
        results[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    rows = [[name, f"{r['import_s']:.3f}", f"{r['load_s']:.3f}", f"{r['rss_mb']:.0f}",
             f"{r['peak_mb']:.0f}"] for name, r in results.items()]
    print(table(f"Embedding model in a fresh process (median of {args.runs}; RSS above numpy)",
                ["case", "import s", "load s", "RSS MB", "peak MB"], rows))
    write_json(args.json, "model", {"results": results})


if __name__ == "__main__":
    main()
