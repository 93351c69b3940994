"""core.heap.give_back returns free memory from inside the heap to the system."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, python_env

HOLES = """
import sys
from lore_plugin.core.heap import give_back

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

# 600 blocks of 100 KB (below glibc's mmap threshold: from the heap), all but every 50th
# freed: holes inside the heap, which glibc does not trim by itself.
blocks = [bytearray(100_000) for _ in range(600)]
kept = blocks[::50]
del blocks
before = anon()
if sys.argv[1] == "give-back":
    give_back()
print(before - anon())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_give_back_returns_the_holes_a_large_transient_load_leaves():
    freed = {}
    for how in ("keep", "give-back"):
        done = subprocess.run([sys.executable, "-c", HOLES, how], capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env=python_env())
        assert done.returncode == 0, done.stderr
        freed[how] = float(done.stdout.split()[-1])
    assert freed["keep"] < 5  # MB: glibc keeps the holes on its own
    assert freed["give-back"] > 40  # of the ~57 MB freed
