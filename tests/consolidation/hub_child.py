"""The cycle on one hub space in a process of its own, for the tests that kill it mid-run
(test_hub_consolidation.py): `python -m tests.consolidation.hub_child URL SPACE NOW`. Prints
"ready" before it starts and "done <seconds>" when it finishes. The vectors and the LLM's
answers are synthetic and deterministic, as in test_consolidate.py's killed run."""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from lore_plugin.consolidation import cycle as cons
from lore_plugin.core.config import Settings


class HashEmbedder:
    """A vector per text from its hash: deterministic, and no model to load."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def answer(*, system: str, prompt: str, tool: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The LLM phases' answers: the first and last fact of each group contradict (the last
    is current), and every topic due gets a fresh description."""
    if tool["name"] == "report_contradictions":
        pairs = []
        for block in prompt.split("\n\n"):
            ids = re.findall(r"^(f\d+) ", block, re.MULTILINE)
            if len(ids) >= 2:
                pairs.append({"a": ids[0], "b": ids[-1], "current": ids[-1]})
        return {"contradictions": pairs}
    ids = re.findall(r"^Topic (t\d+):", prompt, re.MULTILINE)
    return {"descriptions": [{"id": i, "content": "a fresh description " + i} for i in ids]}


def main() -> None:
    from lore_plugin.hub import HubStore
    from lore_plugin.llm.client import FakeLLM

    cons.CHUNK, cons.FORGET_CHUNK = 300, 5  # many transaction boundaries to die between
    url, space, now = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = HubStore(url, space)
    print("ready", flush=True)
    started = time.perf_counter()
    cons.consolidate(Settings(db_path=Path("/nonexistent/memory.db"), home=Path("/tmp")),
                     store, lambda: now, FakeLLM(default=answer), HashEmbedder())  # type: ignore[arg-type]
    print(f"done {time.perf_counter() - started:.3f}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
