"""Hook-driven ingestion end to end in-process: real transcripts on disk, the real anthropic
SDK talking HTTP to a fake API on 127.0.0.1, the real embedding model, a real database."""

from __future__ import annotations

import json

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.core.config import Settings
from lore_plugin.llm.client import pick_llm
from lore_plugin.store import Store
from tests.fake_anthropic import text_reply
from tests.knowledge_api import KnowledgeModel, prompt_text
from tests.secrets_corpus import SECRET_VALUES, SECRETS
from tests.transcripts import TranscriptWriter


def conversation(body: dict) -> str:
    """The slice a request sends, without the context and the digests around it."""
    text = body["messages"][0]["content"]
    return text[text.index("<conversation>"):text.index("</conversation>")]


def facts(settings: Settings) -> list[str]:
    store = Store(settings.db_path)
    try:
        return sorted(r[0] for r in store.execute(
            "SELECT summary FROM fragments WHERE depth = 2 AND superseded_by IS NULL"))
    finally:
        store.close()


def test_a_multi_batch_session_lands_in_one_hierarchy_with_its_watermark(tmp_path, settings, ingestor, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(30)
    report = ingestor.ingest(writer.path)
    assert report.batches > 1 and report.failed is None
    assert facts(settings) == sorted(f"billing rule {i} uses value {i * 7}" for i in range(30))
    store = Store(settings.db_path)
    topics = store.execute("SELECT id, summary FROM fragments WHERE depth = 0")
    assert [t[1] for t in topics] == ["Billing rules"]  # later batches reused the topic by name
    concepts = store.child_ids(topics[0][0])
    assert len(concepts) == 1
    assert len(store.child_ids(concepts[0])) == 30
    assert store.watermark(str(writer.path)) == writer.path.stat().st_size
    frag = store.get(store.child_ids(concepts[0])[0])
    assert frag.source_session == writer.session and frag.project == "/work/project-a"
    assert frag.metadata["transcript"] == str(writer.path)
    temporal = store.execute("SELECT count(*) FROM edges WHERE kind = 'temporal'")[0][0]
    assert temporal == 29  # the 30 sibling facts form one chain across batches
    first = api.messages[0]
    assert first["tool_choice"] == {"type": "tool", "name": "record_knowledge"}
    assert "Billing rules" in prompt_text(api.messages[-1])  # existing topics are offered back


def test_fragments_carry_the_time_of_the_conversation(tmp_path, settings, ingestor):
    writer = TranscriptWriter(tmp_path / "s.jsonl", day="2025-02-03")
    writer.exchange(2)
    ingestor.ingest(writer.path)
    store = Store(settings.db_path)
    created = store.execute("SELECT min(created_at), max(created_at) FROM fragments")[0]
    assert 1738540800 <= created[0] <= created[1] < 1738540800 + 86400  # 2025-02-03 UTC


def test_a_resumed_session_and_a_compact_ingest_only_what_is_new(tmp_path, settings, ingestor, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(3)
    ingestor.ingest(writer.path)
    sent_before = len(api.messages)
    writer.compact("Summary: billing rule 0 uses value 0 and billing rule 1 uses value 7.")
    writer.user("After compacting: billing rule 50 uses value 350.")
    writer.assistant("Recorded billing rule 50.", tool=False)
    ingestor.ingest(writer.path)
    new_prompts = [conversation(m) for m in api.messages[sent_before:]]
    assert len(new_prompts) == 1
    assert "rule 50" in new_prompts[0] and "rule 0 " not in new_prompts[0]
    assert "Summary:" not in prompt_text(api.messages[-1])
    assert facts(settings).count("billing rule 0 uses value 0") == 1
    assert "billing rule 50 uses value 350" in facts(settings)


def test_an_incomplete_last_line_waits_for_its_newline(tmp_path, settings, ingestor):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(1)
    line = json.dumps({"type": "user", "uuid": "u9", "sessionId": writer.session, "cwd": writer.cwd,
                       "message": {"role": "user", "content": "billing rule 9 uses value 63"}})
    writer.append(line[:40].encode())
    ingestor.ingest(writer.path)
    assert "billing rule 9 uses value 63" not in facts(settings)
    writer.append(line[40:].encode() + b"\n")
    ingestor.ingest(writer.path)
    assert "billing rule 9 uses value 63" in facts(settings)


def test_garbage_lines_never_stop_ingestion(tmp_path, settings, ingestor):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(1)
    writer.append(b'{"type": "user", "message": {"content": "trunc\n')
    writer.append(bytes(range(256)) + b"\n")
    writer.append(b'{"type": "some-future-type", "payload": 1}\n')
    writer.append(b"[1, 2, 3]\n")
    writer.append(b'{"type": "user", "message": {"content": "' + b"x" * (10 * 1024 * 1024) + b'"}}\n')
    writer.user("billing rule 77 uses value 539")
    writer.assistant("ok", tool=False)
    ingestor.ingest(writer.path)
    assert {"billing rule 0 uses value 0", "billing rule 77 uses value 539"} <= set(facts(settings))
    assert Store(settings.db_path).watermark(str(writer.path)) == writer.path.stat().st_size


def test_a_malformed_answer_is_retried_then_parked_and_the_rest_goes_on(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    model.fail_next = 3
    model.failure = text_reply("I refuse to call tools")  # malformed: no record_knowledge
    for _ in range(2):
        report = ingestor.ingest(writer.path)
        assert report.failed
    store = Store(settings.db_path)
    assert store.watermark(str(writer.path)) == 0  # retried in place until park_after
    report = ingestor.ingest(writer.path)
    assert report.failed and facts(settings) == []
    parked = store.failures(parked_only=True)
    end = writer.path.stat().st_size
    assert [(p["start_offset"], p["end_offset"]) for p in parked] == [(0, end)]
    assert store.watermark(str(writer.path)) == end  # parked: the place moved past it
    writer.exchange(3, topic="tax")  # later slices are not held up by the parked one
    report = ingestor.ingest(writer.path)
    assert report.failed is None and report.batches >= 1
    assert facts(settings) == [f"tax rule {i} uses value {i * 7}" for i in range(3)]
    report = ingestor.ingest(writer.path, retry_parked=True)  # the parked range itself
    assert report.failed is None and len(facts(settings)) == 5
    assert store.failures() == [] and store.watermark(str(writer.path)) == writer.path.stat().st_size


def test_invalid_record_knowledge_input_is_rejected_whole(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    model.extra = {"topics": [{"name": "x", "summary": "y", "importance": "urgent", "concepts": []}]}
    assert ingestor.ingest(writer.path).failed
    assert facts(settings) == [] and Store(settings.db_path).count_fragments() == 0


def test_a_correction_supersedes_the_older_fragment(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.user("The deploy window is Tuesday at 14:00 UTC.")
    writer.assistant("Noted.", tool=False)
    model.extra = {"topics": [{"name": "Deployment", "summary": "How we deploy", "importance": "high",
                               "concepts": [{"name": "Deploy window", "summary": "When deploys happen",
                                             "importance": "high", "facts": [
                                                 {"summary": "Deploys happen on Tuesday at 14:00 UTC",
                                                  "importance": "high", "basis": "stated"}]}]}]}
    ingestor.ingest(writer.path)
    writer.user("Correction: deploys moved to Thursday at 09:00 UTC.")
    writer.assistant("Updated.", tool=False)
    model.extra = {
        "topics": [{"name": "Deployment", "summary": "How we deploy", "importance": "high",
                    "concepts": [{"name": "Deploy window", "summary": "When deploys happen",
                                  "importance": "high", "facts": [
                                      {"summary": "Deploys happen on Thursday at 09:00 UTC",
                                       "importance": "high", "basis": "stated"}]}]}],
        "corrections": [{"old": "Deploys happen on Tuesday at 14:00 UTC",
                         "new": "Deploys happen on Thursday at 09:00 UTC", "topic": "Deployment"}]}
    report = ingestor.ingest(writer.path)
    assert report.supersessions == 1
    store = Store(settings.db_path)
    rows = dict(store.execute("SELECT summary, superseded_by FROM fragments WHERE depth = 2"))
    new_id = store.find_by_summary("Deploys happen on Thursday at 09:00 UTC")
    assert rows["Deploys happen on Tuesday at 14:00 UTC"] == new_id
    assert len(store.execute("SELECT id FROM fragments WHERE depth = 1")) == 1  # concept reused


def test_relationships_become_associative_edges(tmp_path, settings, ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)
    writer.user("payments rule 5 uses value 35")
    writer.assistant("ok", tool=False)
    model.extra = {"relationships": [{"from": "billing rule 0 uses value 0",
                                      "to": "payments rule 5 uses value 35", "reason": "same ledger"}]}
    ingestor.ingest(writer.path)
    store = Store(settings.db_path)
    edges = store.edges_by_kind("associative")
    assert len(edges) == 1
    ends = {store.get(edges[0].source).summary, store.get(edges[0].target).summary}
    assert ends == {"billing rule 0 uses value 0", "payments rule 5 uses value 35"}


def test_subagent_transcripts_are_ingested_with_their_session(tmp_path, settings, ingestor):
    from lore_plugin.worker.run import Worker

    main = TranscriptWriter(tmp_path / "proj" / "sess.jsonl")
    main.exchange(1)
    sub = TranscriptWriter(tmp_path / "proj" / "sess" / "subagents" / "agent-a1.jsonl")
    sub.user("search subagent: search rule 3 uses value 21")
    sub.assistant("found it", tool=False)
    worker = Worker(settings)
    worker._ingestor = ingestor
    worker.ingest(main.path, main.session)
    assert {"billing rule 0 uses value 0", "search rule 3 uses value 21"} <= set(facts(settings))


def test_lines_appended_while_the_worker_holds_the_lock_are_not_stranded(
        tmp_path, settings, ingestor, api, model):
    """A second worker that finds the lock taken leaves the work to the holder, so the holder
    must read the transcript again if it grew: here it grows while the holder is on the
    subagent's transcript, after it has read the main one to its end."""
    from lore_plugin.core.locks import transcript_lock
    from lore_plugin.worker.run import Worker

    main = TranscriptWriter(tmp_path / "proj" / "sess.jsonl")
    main.exchange(1)
    sub = TranscriptWriter(tmp_path / "proj" / "sess" / "subagents" / "agent-a1.jsonl")
    sub.user("search subagent: search rule 3 uses value 21")
    sub.assistant("found it", tool=False)
    second_worker_gave_up = []

    def session_goes_on(body):
        if "search rule 3" in prompt_text(body) and not second_worker_gave_up:
            main.user("billing rule 9 uses value 63")
            main.assistant("noted", tool=False)
            lock = transcript_lock(settings.lock_dir, str(main.path))  # the Stop hook's worker
            second_worker_gave_up.append(not lock.try_acquire())
        return model(body)

    api.responder = session_goes_on
    worker = Worker(settings)
    worker._ingestor = ingestor
    worker.ingest(main.path, main.session)
    assert second_worker_gave_up == [True]
    assert "billing rule 9 uses value 63" in facts(settings)
    assert Store(settings.db_path).watermark(str(main.path)) == main.path.stat().st_size


def test_no_secret_reaches_the_llm_request_or_the_database(tmp_path, settings, ingestor, api, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    for name, line in SECRETS:
        writer.user(f"billing rule 1 uses value 7. Also {line}")
        writer.assistant(f"I will keep the {name} safe: {line}", tool=False)
    model.extra = {"topics": [{"name": "Secrets test", "summary": "the prompt, echoed",
                               "importance": "low", "concepts": [{
                                   "name": "echo", "summary": "echo", "importance": "low",
                                   "facts": [{"summary": "echo", "importance": "low",
                                              "content": "placeholder"}]}]}]}
    original = model.__call__

    def echo(body):  # a model that copies its whole prompt into memory: the worst case
        reply = original(body)
        model.extra["topics"][0]["concepts"][0]["facts"][0]["content"] = prompt_text(body)[:19000]
        return reply

    api.responder = echo
    ingestor.ingest(writer.path)
    ingestor.ingest(writer.path)  # second pass stores the echoed prompt
    bodies = json.dumps(api.messages)
    db_bytes = b"".join(p.read_bytes() for p in settings.db_path.parent.glob("memory.db*"))
    for secret in SECRET_VALUES:
        assert secret not in bodies, secret
        assert secret.encode() not in db_bytes, secret
    assert "rule 1 uses value 7" in bodies


def test_no_secret_reaches_the_logs_even_when_the_api_quotes_the_prompt_back(
        tmp_path, settings, api, embedder, clock):
    """A failed call is logged and kept with its batch, and an API error may quote the request.
    Here every corpus line is quoted back in an error of its own before its batch succeeds."""
    import dataclasses
    import logging
    import re

    from lore_plugin.safety.logs import setup_logging
    from tests.fake_anthropic import error_reply

    settings = dataclasses.replace(settings, park_after=100_000)
    llm = pick_llm(settings, env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url})
    ingestor = Ingestor(settings, llm, embedder, clock)
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    for name, line in SECRETS:
        writer.user(f"billing rule 1 uses value 7. Also {line}")
        writer.assistant(f"Noted the {name}.", tool=False)
    model, quoted = KnowledgeModel(), {}

    def quoting(body):  # fail once per "Also ...", quoting 300 characters from there
        prompt = prompt_text(body)
        starts = [m.start() for m in re.finditer("Also ", prompt)]
        done = quoted.get(prompt, 0)
        if done < len(starts):
            quoted[prompt] = done + 1
            return error_reply(400, prompt[starts[done]:starts[done] + 300])
        return model(body)

    api.responder = quoting
    root = logging.getLogger()
    before = list(root.handlers)
    setup_logging(settings.home / "logs", "worker")
    try:
        for _ in range(len(SECRETS) + 100):
            if ingestor.ingest(writer.path, ignore_backoff=True).failed is None:
                break
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
    logs = "".join(p.read_text() for p in (settings.home / "logs").glob("*.log*"))
    db_bytes = b"".join(p.read_bytes() for p in settings.db_path.parent.glob("memory.db*"))
    assert logs.count("Also ") >= len(SECRETS) and "[REDACTED:" in logs  # every line was quoted
    assert "billing rule 1 uses value 7" in facts(settings)  # and then ingested
    for secret in SECRET_VALUES:
        assert secret not in logs, secret
        assert secret.encode() not in db_bytes, secret


def test_without_any_llm_ingestion_waits_and_nothing_moves(tmp_path, settings):
    from lore_plugin.core.errors import LLMUnavailable

    with pytest.raises(LLMUnavailable, match="paused"):
        pick_llm(settings, env={}, which=lambda name, **_: None)


# --- fewer tokens per turn (issue 15) ------------------------------


def test_a_slice_of_small_talk_is_not_sent_and_its_place_is_kept(tmp_path, settings, ingestor, api):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    for word in ("hello there", "thanks!", "continue", "/exit"):
        writer.user(word)
        writer.assistant("Sure.")
    report = ingestor.ingest(writer.path)
    assert report.batches == 0 and api.messages == []
    store = Store(settings.db_path)
    assert store.watermark(str(writer.path)) == writer.path.stat().st_size
    writer.exchange(2)  # the next real request is sent, without the small talk before it
    ingestor.ingest(writer.path)
    assert len(api.messages) == 1 and "hello there" not in conversation(api.messages[0])
    assert len(facts(settings)) == 2


def test_the_prompt_lists_the_existing_topics_closest_to_the_conversation(
        tmp_path, settings, ingestor, api, embedder):
    from lore_plugin.capture.known import TOPICS_SENT
    from lore_plugin.recall.memory import Memory

    memory = Memory(settings.db_path, embedder)
    memory.project = "/work/project-a"  # the session's: only its project's topics are reused
    subjects = ["Kubernetes", "React", "Terraform", "Redis", "Kafka", "nginx", "Django", "Spark"]
    aspects = ["deployment", "testing", "logging", "security", "configuration"]
    for name in [f"{s} {a}" for s in subjects for a in aspects] + ["Billing rules"]:
        memory.store(f"{name}: what was decided about it", name, depth=0)
    memory.close()
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(2)  # about billing rules
    ingestor.ingest(writer.path)
    prompt = api.messages[0]["messages"][0]["content"]
    listed = prompt[prompt.index("<existing_topics>"):prompt.index("</existing_topics>")]
    names = [line[2:] for line in listed.splitlines() if line.startswith("- ")]
    assert "Billing rules" in names and len(names) <= TOPICS_SENT < 41
    assert facts(settings) == ["billing rule 0 uses value 0", "billing rule 1 uses value 7"]
    store = Store(settings.db_path)
    assert len(store.execute("SELECT id FROM fragments WHERE depth = 0")) == 41  # reused


def test_extractions_cues_reach_the_stored_fact_cleaned_and_redacted(tmp_path, settings,
                                                                     ingestor, model, api):
    """Whatever shape the model sends cues in (a list, its JSON text, junk among them), they
    are kept beside the fact, normalised and redacted, and find it."""
    model.cues = True
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(3)
    assert ingestor.ingest(writer.path).failed is None
    store = Store(settings.db_path)
    try:
        cues = dict(store.execute("SELECT summary, cues FROM fragments WHERE depth = 2"))
        assert cues["billing rule 0 uses value 0"] == (
            "billing setting number 0\nhow billing behaves for case 0")
        assert cues["billing rule 2 uses value 14"] == (
            "billing setting number 2\nhow billing behaves for case 2")  # junk dropped
        one = cues["billing rule 1 uses value 7"].splitlines()
        assert one[:2] == ["billing setting number 1", "how billing behaves for case 1"]
        assert "L0REfake" not in one[2] and "REDACTED" in one[2]
        found = [f.summary for f, _ in store.keyword_search('"behaves"', 10)]
        assert len(found) == 3
    finally:
        store.close()
    sent = api.messages[0]  # the model was asked for cues, in the schema and the prompt
    fact_schema = (sent["tools"][0]["input_schema"]["properties"]["topics"]["items"]
                   ["properties"]["concepts"]["items"]["properties"]["facts"]["items"])
    assert fact_schema["properties"]["cues"]["type"] == "array"
    assert "cues of every fact: 3 to 6 short phrases" in json.dumps(sent["system"])
