"""A throwaway hub created and filled by one checkout's code, for hub_query_worker.py to time
(two checkouts whose schemas differ cannot share one hub: each refuses the other's version).

    PYTHONPATH=CHECKOUT python bench/hub_fill.py FOLDER SIZE    # prints the hub's URL last
    PYTHONPATH=CHECKOUT python bench/hub_fill.py FOLDER --stop

Starts `lore hub dev`'s server in FOLDER (it keeps running), creates or migrates the schema
with the checkout's `init_hub`, and pushes bench_server.py's SIZE memory into space
bench-SIZE as bench_hub.py does (`lore hub push`'s path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import lore_plugin  # the checkout on PYTHONPATH, before bench_hub puts this one first
from lore_plugin.hub import dev, init_hub

TIMED = Path(os.environ["PYTHONPATH"]).resolve()
assert Path(lore_plugin.__file__ or "").resolve().is_relative_to(TIMED), lore_plugin.__file__
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hub import push  # noqa: E402
from bench_server import bench_db, make_embedder  # noqa: E402


def main() -> None:
    folder = Path(sys.argv[1])
    if sys.argv[2] == "--stop":
        dev.stop(folder)
        return
    size = int(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    server = dev.start(folder)
    init_hub(server.url)
    print(push(bench_db(size, make_embedder(), False), server.url, f"bench-{size}"),
          file=sys.stderr)
    print(server.url)


if __name__ == "__main__":
    main()
