"""Extraction files a session's topics only under topics of the session's project
(capture/known.match_topic): by name, then by meaning. Real transcripts, the real model and a
real SQLite file; the fake API answers as the extractor would."""

from __future__ import annotations

from lore_plugin.store import Store
from tests.transcripts import TranscriptWriter

ATLAS, LUMEN = "/work/atlas", "/work/lumen"


def session(tmp_path, name: str, cwd: str, number: int) -> TranscriptWriter:
    return TranscriptWriter(tmp_path / f"{name}.jsonl", cwd=cwd,
                            session=f"0f4c2d9e-5b8a-4c1e-9d3f-7a6b5c4d3e{number:02d}")


def topic(name: str, fact: str) -> dict:
    """An extracted topic as the model sends it, with one stated fact."""
    return {"name": name, "summary": "Rules of the billing domain", "importance": "high",
            "concepts": [{"name": "Billing rule values", "summary": "Agreed values",
                          "importance": "medium",
                          "facts": [{"summary": fact, "content": fact, "importance": "medium",
                                     "basis": "stated"}]}]}


def topics(settings) -> dict[str, list[tuple[str, str]]]:
    """project -> [(topic name, fact under it)] of every live fact."""
    store = Store(settings.db_path)
    try:
        rows = store.execute(
            "SELECT t.project, t.summary, f.summary FROM fragments t "
            "JOIN edges a ON a.source = t.id AND a.kind = 'hierarchical' "
            "JOIN edges b ON b.source = a.target AND b.kind = 'hierarchical' "
            "JOIN fragments f ON f.id = b.target "
            "WHERE t.depth = 0 AND f.depth = 2 AND t.superseded_by IS NULL")
    finally:
        store.close()
    found: dict[str, list[tuple[str, str]]] = {}
    for project, name, fact in rows:
        found.setdefault(project, []).append((name, fact))
    return {p: sorted(v) for p, v in found.items()}


def test_a_topic_of_the_same_name_in_another_project_is_not_reused(tmp_path, settings, ingestor):
    atlas = session(tmp_path, "atlas", ATLAS, 1)
    atlas.exchange(1)
    assert ingestor.ingest(atlas.path).failed is None
    lumen = session(tmp_path, "lumen", LUMEN, 2)
    lumen.user("In lumen we decided that billing rule 5 uses value 35.")
    lumen.assistant("Noted for lumen.", tool=False)
    assert ingestor.ingest(lumen.path).failed is None
    again = session(tmp_path, "atlas-2", ATLAS, 3)  # a later atlas session finds its own
    again.user("Also, billing rule 6 uses value 42.")
    again.assistant("Noted.", tool=False)
    assert ingestor.ingest(again.path).failed is None
    assert topics(settings) == {
        ATLAS: [("Billing rules", "billing rule 0 uses value 0"),
                ("Billing rules", "billing rule 6 uses value 42")],
        LUMEN: [("Billing rules", "billing rule 5 uses value 35")]}
    store = Store(settings.db_path)
    try:
        assert len(store.topics_named("billing RULES")) == 2
    finally:
        store.close()


def test_a_topic_close_in_meaning_is_matched_only_within_its_project(tmp_path, settings,
                                                                     ingestor, model):
    atlas = session(tmp_path, "atlas", ATLAS, 1)
    atlas.exchange(1)
    assert ingestor.ingest(atlas.path).failed is None
    # "Billing rule set" lies at 0.95 of atlas's "Billing rules": above TOPIC_MATCH.
    model.extra = {"topics": [topic("Billing rule set", "lumen bills weekly")]}
    lumen = session(tmp_path, "lumen", LUMEN, 2)
    lumen.user("In lumen billing runs weekly.")
    lumen.assistant("Noted for lumen.", tool=False)
    assert ingestor.ingest(lumen.path).failed is None
    # Back in atlas the same name is lumen's topic (a wrong project by name) and the closest
    # in meaning; atlas's own, ranked second, is the one it is.
    model.extra = {"topics": [topic("Billing rule set", "atlas bills monthly")]}
    again = session(tmp_path, "atlas-2", ATLAS, 3)
    again.user("In atlas billing runs monthly.")
    again.assistant("Noted.", tool=False)
    assert ingestor.ingest(again.path).failed is None
    assert topics(settings) == {
        ATLAS: [("Billing rules", "atlas bills monthly"),
                ("Billing rules", "billing rule 0 uses value 0")],
        LUMEN: [("Billing rule set", "lumen bills weekly")]}


def test_a_session_in_no_project_matches_only_topics_of_none(tmp_path, settings, ingestor):
    atlas = session(tmp_path, "atlas", ATLAS, 1)
    atlas.exchange(1)
    assert ingestor.ingest(atlas.path).failed is None
    root = session(tmp_path, "root", "/", 2)  # a session at the file system's root: none
    root.user("Generally, billing rule 9 uses value 63.")
    root.assistant("Noted.", tool=False)
    assert ingestor.ingest(root.path).failed is None
    found = topics(settings)
    assert found[ATLAS] == [("Billing rules", "billing rule 0 uses value 0")]
    assert [v for k, v in found.items() if k != ATLAS] == [
        [("Billing rules", "billing rule 9 uses value 63")]]


def test_the_prompt_lists_only_the_sessions_projects_topic_names(tmp_path, embedder, clock):
    from lore_plugin.capture.known import topics_for
    from lore_plugin.capture.transcript import Delta
    from lore_plugin.recall.memory import Memory

    memory = Memory(tmp_path / "memory.db", embedder, clock=clock, project=ATLAS)
    memory.store("Atlas deploys", "Atlas deploys", depth=0)
    memory.project = LUMEN
    memory.store("Lumen styling", "Lumen styling", depth=0)
    memory.project = None
    memory.store("Editor settings", "Editor settings", depth=0)
    try:
        for project, listed in ((ATLAS, ["Atlas deploys"]), (LUMEN, ["Lumen styling"]),
                                (None, ["Editor settings"])):
            memory.project = project
            assert topics_for(memory, Delta([], 0, 0, 0, 0, None, None), "deploys and styling") == listed
    finally:
        memory.close()
