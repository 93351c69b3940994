"""Issue 24 §3-5 end to end in-process: what each extraction request carries (known facts with
ids, the tools' evidence, the end of the slice before, project and date), what a correction
does with and without an id, and how a partial, cut-off or refused answer is handled. The real
anthropic SDK talks HTTP to the fake API on 127.0.0.1; the embedding model and database are
real."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.core.config import Settings
from lore_plugin.llm.client import pick_llm
from lore_plugin.maintenance.curation import Curator
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store
from tests.fake_anthropic import Reply, error_reply
from tests.transcripts import TranscriptWriter


def user_message(body: dict) -> str:
    return body["messages"][0]["content"]


def block(text: str, tag: str) -> str:
    return text[text.index(f"<{tag}>") + len(tag) + 2:text.index(f"</{tag}>")]


def live_facts(settings: Settings) -> list[str]:
    store = Store(settings.db_path)
    try:
        return sorted(r[0] for r in store.execute(
            "SELECT summary FROM fragments WHERE depth >= 2 AND superseded_by IS NULL"))
    finally:
        store.close()


def fact_answer(topic: str, concept: str, *facts: tuple[str, str]) -> dict:
    return {"topics": [{"name": topic, "summary": f"About {topic}", "importance": "medium",
                        "concepts": [{"name": concept, "summary": f"About {concept}",
                                      "importance": "medium",
                                      "facts": [{"summary": s, "importance": "medium",
                                                 "basis": b} for s, b in facts]}]}]}


# --- what each request carries ----------------------------------------------------------------


def test_a_request_carries_the_known_facts_with_ids_the_project_and_the_date(
        tmp_path, settings, ingestor, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl", day="2026-03-14")
    writer.exchange(2)
    ingestor.ingest(writer.path)
    writer.user("Turn 9 about billing: we decided that billing rule 1 now uses value 8.")
    writer.assistant("Noted.", tool=False)
    ingestor.ingest(writer.path)
    first, last = (user_message(m) for m in (api.messages[0], api.messages[-1]))
    assert block(first, "known_facts").strip() == "(none)"
    known = block(last, "known_facts")
    assert re.search(r"^\[k\d\] Billing rules › Billing rule values › billing rule 1 uses "
                     r"value 7 \(stated, 2026-03-14\)$", known, re.MULTILINE), known
    session = block(last, "session")
    assert "project: /work/project-a" in session and "date: 2026-03-14" in session
    data = last[last.index("<data>"):last.index("</data>")]
    assert "<known_facts>" in data and "<session>" in data  # data, never instructions


def test_a_failing_command_its_output_head_and_tail_and_the_fix_reach_the_extractor(
        tmp_path, settings, api, embedder, clock):
    settings = dataclasses.replace(settings, batch_bytes=64 * 1024)  # the whole story, one slice
    ingestor = Ingestor(settings, pick_llm(settings, env={
        "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}), embedder, clock)
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.user("Please run the test suite of the billing service.")
    traceback = ("Traceback (most recent call last):\n" + "  File 'x.py', line 1\n" * 400
                 + "ModuleNotFoundError: No module named 'billing'")
    for command, output, failed in (("pytest -q", traceback, True),
                                    ("pip install -e .", "Successfully installed", False),
                                    ("pytest -q", "12 passed", False)):
        writer.append({**writer._base("assistant"), "message": {
            "id": f"msg_{command}{failed}", "role": "assistant", "model": "claude-opus-4-8",
            "content": [{"type": "tool_use", "id": f"toolu_{command}{failed}", "name": "Bash",
                         "input": {"command": command}}]}})
        writer.append({**writer._base("user"), "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{command}{failed}",
             "content": ("Exit code 1\n" if failed else "") + output, "is_error": failed}]}})
    writer.assistant("The tests need an editable install first; they pass now.", tool=False)
    ingestor.ingest(writer.path)
    talk = block(user_message(api.messages[0]), "conversation")
    lines = [line for line in talk.splitlines() if line.startswith("Tool: ")]
    assert lines[0].startswith("Tool: Bash `pytest -q` failed: Exit code 1 Traceback")
    assert lines[0].endswith("ModuleNotFoundError: No module named 'billing'")  # the tail
    assert len(lines[0]) < 1000  # the middle of a long output is cut
    assert lines[1:] == ["Tool: Bash `pip install -e .`", "Tool: Bash `pytest -q`"]
    assert "Successfully installed" not in talk  # a success's output is left out


def test_the_next_slice_repeats_the_end_of_the_one_before_marked_as_context_only(
        tmp_path, settings, ingestor, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.user("The staging deploy fails with 'permission denied on /var/run/docker.sock'.")
    writer.assistant("I see the socket error; let me look at the group setup.", tool=False)
    ingestor.ingest(writer.path)
    writer.user("Adding the deploy user to the docker group fixed it.")
    writer.assistant("Good: the fix was the docker group membership.", tool=False)
    ingestor.ingest(writer.path)
    second = user_message(api.messages[-1])
    earlier = block(second, "already_recorded")
    assert "(already recorded, for context only)" in earlier
    assert "permission denied on /var/run/docker.sock" in earlier
    assert "permission denied" not in block(second, "conversation")
    assert "<already_recorded>" not in user_message(api.messages[0])  # nothing before it


# --- corrections ------------------------------------------------------------------------------


def deploy_window(tmp_path, ingestor, model, basis: str = "stated") -> TranscriptWriter:
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.user("The deploy window is Tuesday at 14:00 UTC.")
    writer.assistant("Noted.", tool=False)
    model.extra = fact_answer("Deployment", "Deploy window",
                              ("Deploys happen on Tuesday at 14:00 UTC", basis))
    ingestor.ingest(writer.path)
    return writer


def test_a_correction_by_id_replaces_that_fact_is_journaled_and_can_be_undone(
        tmp_path, settings, ingestor, model, api, embedder):
    writer = deploy_window(tmp_path, ingestor, model)
    writer.user("Deploys now happen on Thursday at 09:00 UTC.")
    writer.assistant("Updated.", tool=False)
    new = "Deploys happen on Thursday at 09:00 UTC"

    def correcting(body: dict) -> dict:  # the model points at the id the prompt showed it
        known = block(user_message(body), "known_facts")
        (kid,) = re.findall(r"^\[(k\d+)\] .*Tuesday", known, re.MULTILINE)
        return {"id": kid, "old": "the deploy slot", "new": new, "topic": "Deployment"}

    model.extra = {**fact_answer("Deployment", "Deploy window", (new, "stated")),
                   "corrections": _Lazy(correcting)}
    assert ingestor.ingest(writer.path).supersessions == 1  # its words did not match: the id did
    assert live_facts(settings) == [new]
    memory = Memory(settings.db_path, embedder)
    try:
        curator = Curator(memory)
        (entry,) = [e for e in curator.history() if e.action == "supersede"]
        assert entry.undoable and "Tuesday" in entry.label and "Thursday" in entry.label
        curator.undo(entry.id)
    finally:
        memory.close()
    assert live_facts(settings) == sorted([new, "Deploys happen on Tuesday at 14:00 UTC"])


def test_a_correction_without_an_id_that_matches_nothing_strictly_supersedes_nothing(
        tmp_path, settings, ingestor, model):
    writer = deploy_window(tmp_path, ingestor, model)
    writer.user("Release notes are now published on Tuesdays.")
    writer.assistant("Noted.", tool=False)
    new = "Release notes are published on Tuesdays"
    model.extra = {**fact_answer("Release process", "Release notes", (new, "stated")),
                   "corrections": [{"old": "Deploys happen on Tuesdays", "new": new,
                                    "topic": "Release process"}]}  # another topic
    report = ingestor.ingest(writer.path)
    assert report.supersessions == 0 and report.failed is None
    assert live_facts(settings) == sorted([new, "Deploys happen on Tuesday at 14:00 UTC"])


def test_a_guess_never_replaces_what_the_user_stated_it_is_flagged_for_review(
        tmp_path, settings, ingestor, model):
    writer = deploy_window(tmp_path, ingestor, model)
    writer.user("What time is it in Tokyo?")
    writer.assistant("Deploys probably moved to Friday, judging by the calendar.", tool=False)
    guess = "Deploys probably happen on Friday"

    def correcting(body: dict) -> dict:
        kid = re.findall(r"^\[(k\d+)\]", block(user_message(body), "known_facts"), re.M)[0]
        return {"id": kid, "old": "Tuesday", "new": guess, "topic": "Deployment"}

    model.extra = {**fact_answer("Deployment", "Deploy window", (guess, "inferred")),
                   "corrections": _Lazy(correcting)}
    assert ingestor.ingest(writer.path).supersessions == 0
    assert "Deploys happen on Tuesday at 14:00 UTC" in live_facts(settings)
    store = Store(settings.db_path)
    review = store.get(store.find_by_summary(guess)).metadata["review"]
    assert review["contradicts"] == store.find_by_summary("Deploys happen on Tuesday at 14:00 UTC")
    # A person sees it: `lore status` names the flagged fact and the statement it contradicts.
    from lore_plugin.maintenance.status import status_lines
    from lore_plugin.recall.render import short_id

    shown = "\n".join(status_lines(settings))
    assert "1 fact flagged" in shown and guess in shown
    assert f"(against [{short_id(review['contradicts'])}])" in shown


class _Lazy:
    """A correction computed from the request it answers (KnowledgeModel copies `extra`)."""

    def __init__(self, make) -> None:
        self.make = make


@pytest.fixture(autouse=True)
def _lazy_corrections(model, monkeypatch):
    original = type(model).__call__

    def call(self, body):
        extra = dict(self.extra)
        lazy = {k: v for k, v in extra.items() if isinstance(v, _Lazy)}
        self.extra = {**extra, **{k: [v.make(body)] for k, v in lazy.items()}}
        try:
            return original(self, body)
        finally:
            self.extra = extra

    monkeypatch.setattr(type(model), "__call__", call)


# --- a bad answer loses only what it must -----------------------------------------------------


def test_a_partial_answer_keeps_its_valid_topics(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    bad = fact_answer("Broken", "Broken", ("x", "stated"))["topics"][0]
    bad["importance"] = "urgent"
    model.extra = {"topics": [bad, *fact_answer("Deployment", "Deploy window",
                                                ("Deploys need a green build", "stated"))["topics"]]}
    report = ingestor.ingest(writer.path)
    assert report.failed is None and report.batches == 1
    assert live_facts(settings) == ["Deploys need a green build"]


def test_rate_limits_and_overload_never_park_a_batch(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    model.fail_next = 10_000
    for status in (429, 529, 429, 529):  # more rounds than park_after (3)
        model.failure = error_reply(status, retry_after=0)
        report = ingestor.ingest(writer.path, ignore_backoff=True)
        assert report.skipped == "transient" and report.failed is None
    store = Store(settings.db_path)
    assert store.failures(parked_only=True) == []
    assert store.failure(str(writer.path))["attempts"] == 0 and store.watermark(str(writer.path)) == 0
    model.fail_next = 0
    assert ingestor.ingest(writer.path, ignore_backoff=True).batches == 1
    assert store.failures() == []


def test_an_answer_cut_off_at_max_tokens_is_asked_again_on_a_smaller_slice(
        tmp_path, settings, ingestor, model, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(4)
    cut = {"type": "tool_use", "id": "toolu_cut", "name": "record_knowledge",
           "input": {"topics": []}}
    model.fail_next = 1
    model.failure = Reply(blocks=(cut,), stop_reason="max_tokens")
    report = ingestor.ingest(writer.path)
    assert report.failed is None
    first, second = (block(user_message(m), "conversation") for m in api.messages[:2])
    assert len(second) < len(first) * 0.75 and first.startswith(second[:200])
    assert live_facts(settings) == sorted(f"billing rule {i} uses value {i * 7}" for i in range(4))
    assert Store(settings.db_path).failures() == []


def test_a_long_turn_keeps_its_head_and_its_tail(tmp_path):
    from lore_plugin.capture.batches import MAX_TURN_CHARS, read_batch

    writer = TranscriptWriter(tmp_path / "s.jsonl")
    pasted = ("Why does the import fail? Traceback (most recent call last):\n"
              + "  File 'app.py', line 3, in <module>\n" * 800
              + "ImportError: cannot import name 'Billing' from 'billing'")
    writer.user(pasted)
    _, text = read_batch(writer.path, 0, 1 << 20)
    assert text.startswith("User: Why does the import fail? Traceback")
    assert text.endswith("ImportError: cannot import name 'Billing' from 'billing'")
    assert " […] " in text and len(text) < MAX_TURN_CHARS + 100


def test_status_lists_a_parked_range_and_retry_parked_extracts_it(tmp_path, settings, ingestor,
                                                                  model, env):
    import subprocess

    from tests.conftest import PYTHON
    from tests.fake_anthropic import text_reply

    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    model.fail_next = 3
    model.failure = text_reply("no tool call")
    cli_settings = dataclasses.replace(settings, db_path=Path(env["LORE_DB_PATH"]))
    llm = pick_llm(cli_settings, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": env[
        "ANTHROPIC_BASE_URL"]})
    failing = Ingestor(cli_settings, llm, None, lambda: 1_750_000_000.0)
    for _ in range(3):
        failing.ingest(writer.path)
    failing.close()
    end = writer.path.stat().st_size

    def lore(*args: str) -> str:
        done = subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    status = lore("status")
    assert f"parked: {writer.path} bytes 0-{end}" in status and "lore retry-parked" in status
    out = lore("retry-parked")
    assert f"{writer.path} bytes 0-{end}" in out and "retried 1 parked range(s)" in out
    assert "parked:" not in lore("status")
    store = Store(Path(env["LORE_DB_PATH"]))
    assert store.failures() == [] and len(store.execute(
        "SELECT id FROM fragments WHERE depth = 2")) == 2
