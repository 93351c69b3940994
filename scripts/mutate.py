#!/usr/bin/env python3
"""Mutation testing for Lore's critical promises: does a test see the bug it is named for?

Each mutation below is one small, plausible bug in a module that keeps a promise (exactly
once, redaction, owner-only files, the viewer's guard, the recalled-data frame,
near-duplicates, the worker queue). For each, this script copies the tree to a temporary
folder (the working tree is never touched), applies the mutation there, and runs the tests
named for that promise. A mutation is *killed* when they fail, and *survived* when they pass:
a survivor is a promise no test checks.

    python scripts/mutate.py            # every mutation, after a baseline (16 min, loaded)
    python scripts/mutate.py --quick    # the subset tests/test_mutations.py runs in CI
    python scripts/mutate.py --only ID  # one mutation, by id (repeatable)
    python scripts/mutate.py --list

The baseline first runs each test selection on the unmutated copy: a selection that fails
there would "kill" every mutation for nothing. Exit status 0 only when every mutation run
was killed and every baseline passed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache",
                              ".ruff_cache", "*.db", "*.db-*")
TIMEOUT = 300  # per test run; a mutation that hangs its tests counts as killed


@dataclass(frozen=True)
class Mutation:
    id: str
    path: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # pytest arguments: files or node ids
    quick: bool = False  # in the CI subset


CRASH = ("tests/capture/test_crash_points.py::"
         "test_a_worker_killed_at_each_step_leaves_every_batch_stored_exactly_once")
STRANDED = ("tests/capture/test_ingest.py::"
            "test_lines_appended_while_the_worker_holds_the_lock_are_not_stranded")
FRAME = "tests/safety/test_provenance.py::test_a_fragment_cannot_close_the_recalled_block_early"
STORING = "tests/recall/test_storing.py"
VIEWER = "tests/web/test_viewer.py"

# Known gaps, left out of the list because no test sees them yet (both survived a run):
# - in ingest.py's path for a batch with nothing worth extracting, the recall judgements and
#   the watermark committing apart (`with store.write():` -> `if True:`): a crash between the
#   two would judge those recalls twice; it needs a crash point there and a recall fixture;
# - the drain's second look (`slot = ... if jobs.waiting(home) else None` -> `slot = None`):
#   a job queued in the instant between a worker's last look at the queue and its letting go
#   of the slot; test_worker_cap's 50 hooks at once never hit that instant.
MUTATIONS = (
    # -- exactly once: the watermark and the ingest transaction (capture/ingest.py) --------
    Mutation("ingest-insert-own-transaction", "lore_plugin/capture/ingest.py",
             "        with store.write():\n            for item in planned:",
             "        if True:  # each insert commits alone\n            for item in planned:",
             (f"{CRASH}[after-insert:1]",)),
    Mutation("ingest-watermark-own-transaction", "lore_plugin/capture/ingest.py",
             '            crash_point("before-watermark")',
             '            store.conn.execute("COMMIT"); store.conn.execute("BEGIN IMMEDIATE")'
             '; crash_point("before-watermark")',
             (f"{CRASH}[before-watermark]",), quick=True),
    # -- the worker's queue and its loop (capture/jobs.py, worker/run.py) ---------------
    Mutation("jobs-requeue-live-claims", "lore_plugin/capture/jobs.py",
             "if marker and pid.isdigit() and not pid_alive(int(pid)):",
             "if marker and pid.isdigit() and pid_alive(int(pid)):",
             (f"{CRASH}[after-claim]",)),
    Mutation("jobs-claim-kept", "lore_plugin/worker/run.py",
             "                jobs.finish(claimed)", "                pass",
             (f"{CRASH}[after-commit:2]",)),
    Mutation("jobs-one-slot-too-many", "lore_plugin/capture/jobs.py",
             "for index in range(max(slots, 1)):", "for index in range(max(slots, 1) + 1):",
             ("tests/capture/test_worker_cap.py",)),
    Mutation("worker-grown-file-not-reread", "lore_plugin/worker/run.py",
             '            if _size(path) <= size_at_start or totals["failed"]:',
             "            if True:",
             (STRANDED,), quick=True),
    # -- redaction (safety/redact.py) -------------------------------------------------
    Mutation("redact-private-kept", "lore_plugin/safety/redact.py",
             "        text = _PRIVATE.sub(PRIVATE_MARKER, text)", "        text = text",
             ("tests/safety/test_redact.py",)),
    Mutation("redact-one-pass", "lore_plugin/safety/redact.py",
             "    for _ in range(MAX_PASSES):", "    for _ in range(1):",
             ("tests/safety/test_redact.py",)),
    Mutation("redact-hints-ignored", "lore_plugin/safety/redact.py",
             "        if not hints or not hints.isdisjoint(present):", "        if not hints:",
             ("tests/safety/test_redact.py",), quick=True),
    Mutation("redact-anthropic-rule-gone", "lore_plugin/safety/secret_tokens.py",
             '    rule("anthropic-key", "sk-ant-", _START + r"sk-ant-[A-Za-z0-9_\\-]{20,}+"),\n',
             "", ("tests/safety/test_redact.py",)),
    # -- owner-only files (core/private.py) ----------------------------------------------
    Mutation("private-umask-022", "lore_plugin/core/private.py",
             "    os.umask(0o077)", "    os.umask(0o022)", ("tests/test_private.py",), quick=True),
    Mutation("private-group-bits-allowed", "lore_plugin/core/private.py",
             "OPEN_BITS = 0o077", "OPEN_BITS = 0o007", ("tests/test_private.py",)),
    # -- the viewer's guard (web/security.py) ---------------------------------------------
    Mutation("viewer-any-host", "lore_plugin/web/security.py",
             'if headers.get("host", "").lower() not in self.secrets.hosts():', "if False:",
             (VIEWER,)),
    Mutation("viewer-token-unchecked", "lore_plugin/web/security.py",
             "    return given is not None and hmac.compare_digest(given.encode(), expected.encode())",
             "    return given is not None", (VIEWER,)),
    Mutation("viewer-any-origin", "lore_plugin/web/security.py",
             "if origin is not None and origin not in self.secrets.origins():", "if False:",
             (VIEWER,)),
    Mutation("viewer-cross-site-fetch", "lore_plugin/web/security.py",
             'if site is not None and site not in ("same-origin", "none"):', "if False:",
             (VIEWER,)),
    Mutation("viewer-csrf-unchecked", "lore_plugin/web/security.py",
             "    return isinstance(form_value, str) and _same(form_value, secrets_.csrf)",
             "    return isinstance(form_value, str)", (VIEWER,), quick=True),
    # -- data framing: recalled text never forges a tag (safety/frame.py) -----------------
    Mutation("frame-body-not-neutralised", "lore_plugin/safety/frame.py",
             '    return f"<{TAG}>\\n{notice}\\n{neutralise(body)}\\n</{TAG}>"',
             '    return f"<{TAG}>\\n{notice}\\n{body}\\n</{TAG}>"',
             (FRAME, "tests/safety/test_poisoning.py"), quick=True),
    Mutation("frame-tag-case-sensitive", "lore_plugin/safety/frame.py",
             "    return re.compile(_TAG_SHAPE, re.IGNORECASE)",
             "    return re.compile(_TAG_SHAPE)",
             ("tests/safety/test_frame.py",)),
    Mutation("frame-invisible-kept", "lore_plugin/safety/frame.py",
             "_INVISIBLE = re.compile(\n",
             '_INVISIBLE = re.compile("(?!)") or re.compile(\n',
             ("tests/safety/test_frame.py",)),
    Mutation("neardup-numbers-ignored", "lore_plugin/recall/storing.py",
             "        return (their_numbers == numbers\n                and sum(",
             "        return (sum(", (STORING,), quick=True),
    Mutation("neardup-some-words-enough", "lore_plugin/recall/storing.py",
             "SHARED_TERMS = 1.0", "SHARED_TERMS = 0.8", (STORING,)),
    Mutation("neardup-threshold-too-strict", "lore_plugin/recall/storing.py",
             "NEAR_DUPLICATE = 0.92", "NEAR_DUPLICATE = 0.999", (STORING,)),
    # Issue 30: cues are the note's words for the prompt hook's coverage, never a way past
    # redaction, and never overwritten by consolidation; placement keeps each project apart.
    Mutation("cues-not-the-notes-words", "lore_plugin/store/terms.py",
             "summary || ' ' || content || ' ' || cues)", "summary || ' ' || content)",
             ("tests/store/test_cues.py",)),
    Mutation("cues-unredacted", "lore_plugin/store/fragments.py",
             "    return clean_cues(redact(cues)) if cues else \"\"",
             "    return clean_cues(cues) if cues else \"\"", ("tests/store/test_cues.py",)),
    Mutation("cues-overwritten-by-consolidation", "lore_plugin/consolidation/cue_writing.py",
             "note is None or note.superseded_by or note.cues:",
             "note is None or note.superseded_by:", ("tests/consolidation/test_cue_writing.py",)),
    # A cue change makes the note's cue vectors due (schema 11's trigger): never old phrases'.
    Mutation("cue-change-leaves-old-vectors", "lore_plugin/store/schema.py",
             "        DELETE FROM cue_vectors WHERE fragment_id = old.id;\n        INSERT",
             "        INSERT OR IGNORE", ("tests/store/test_cue_vector_rows.py",)),
    # The cue path speaks only from its bar up: below it, prompts no note answers get one.
    Mutation("cue-path-below-the-bar", "lore_plugin/recall/prompt_cued.py",
             "MIN_CUE = 0.65", "MIN_CUE = 0.45", ("tests/recall/test_prompt_cued.py",)),
    # The judge's order weighs a note's closest cue: a close cue puts its answer first.
    Mutation("order-blind-to-cues", "lore_plugin/recall/prompt_judge.py",
             "1.0 / (1 + c.rank), c.cue)", "1.0 / (1 + c.rank), 0.0)",
             ("tests/recall/test_prompt_recall_judge.py",)),
    Mutation("placement-across-projects", "lore_plugin/recall/storing.py",
             "if found.fragment.id in owner and owner[found.fragment.id] == mine]",
             "if found.fragment.id in owner or mine]", ("tests/recall/test_placement_projects.py",)),
)


def copy_tree(dest: Path) -> Path:
    tree = dest / "lore"
    shutil.copytree(ROOT, tree, ignore=SKIP, symlinks=True)
    return tree


def run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[int | None, float]:
    """pytest's exit code on `tree` (None on a timeout) and the seconds it took."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no stale .pyc between mutations
    env.pop("PYTHONPATH", None)  # the copy's conftest and pyproject point at the copy itself
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               *tests], cwd=tree, env=env, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started
    return proc.returncode, time.monotonic() - started


def apply(tree: Path, m: Mutation) -> None:
    target = tree / m.path
    text = target.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise ValueError(f"{m.id}: the text to mutate occurs {text.count(m.old)} times in "
                         f"{m.path}, not once: update the mutation")
    target.write_text(text.replace(m.old, m.new), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CI subset, without baseline")
    parser.add_argument("--only", action="append", default=[], metavar="ID")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if (not args.quick or m.quick)
              and (not args.only or m.id in args.only)]
    if args.list or not chosen:
        for m in MUTATIONS:
            print(f"{m.id:34} {'quick ' if m.quick else '      '}{m.path}")
        return 0 if chosen else 2
    problems = 0
    with tempfile.TemporaryDirectory(prefix="lore-mutate-") as scratch:
        clean = copy_tree(Path(scratch) / "clean")
        if not (args.quick or args.no_baseline):
            for tests in dict.fromkeys(m.tests for m in chosen):
                code, took = run_tests(clean, tests)
                ok = code == 0
                problems += not ok
                print(f"baseline {'passed' if ok else f'FAILED ({code})'} {took:5.1f}s  {' '.join(tests)}",
                      flush=True)
        killed = survived = errors = 0
        for m in chosen:
            tree = copy_tree(Path(scratch) / m.id)
            try:
                apply(tree, m)
            except ValueError as exc:
                print(f"ERROR    {exc}", flush=True)
                errors += 1
                continue
            code, took = run_tests(tree, m.tests)
            shutil.rmtree(tree)
            if code in (1, None):  # tests failed, or hung: the mutation was seen
                killed += 1
                verdict = "killed" if code else "killed (timeout)"
            elif code == 0:
                survived += 1
                verdict = "SURVIVED"
            else:  # 2-5: interrupted, internal or usage error, nothing collected
                errors += 1
                verdict = f"ERROR ({code})"
            print(f"{verdict:17} {took:5.1f}s  {m.id}", flush=True)
    run = killed + survived + errors
    print(f"mutations: run {run}, killed {killed}, survived {survived}, errors {errors}")
    return 0 if survived == errors == problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
