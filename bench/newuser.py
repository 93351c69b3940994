"""The "new user" set (bench/data/newuser.json), written by hand blind to Lore's rules: the
notes of one developer across two projects and outside any, each with the day it was stored,
prompts that one note answers (kind direct, paraphrase or task) and prompts that no note
answers. `problems` checks that its ids and answers hang together; the rules for which project
the asking session is in are here, so that every script asks the set the same way."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from common import ROOT

DEFAULT_NEWUSER = ROOT / "bench" / "data" / "newuser.json"
KINDS = ("direct", "paraphrase", "task")
# The unrelated prompts are asked from these projects in turn, the first from the first: a
# developer who works on both asks off-topic things in either.
UNRELATED_FROM = ("/home/dev/atlas", "/home/dev/lumen")


def load(path: Path = DEFAULT_NEWUSER) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def problems(data: dict[str, Any]) -> list[str]:
    """Every way the set fails to hang together: an id used twice, an answer naming no note,
    a kind outside KINDS, a date that is not YYYY-MM-DD, an empty text, or a prompt that is
    both related and unrelated."""
    out = []
    for part in ("notes", "related", "unrelated"):
        seen: set[str] = set()
        for item in data[part]:
            if item["id"] in seen:
                out.append(f"{part}: id {item['id']} used twice")
            seen.add(item["id"])
    notes = {n["id"] for n in data["notes"]}
    for note in data["notes"]:
        if not note["summary"].strip() or not note["content"].strip():
            out.append(f"note {note['id']}: empty summary or content")
        try:
            datetime.strptime(note["date"], "%Y-%m-%d")
        except (TypeError, ValueError):
            out.append(f"note {note['id']}: date {note['date']!r} is not YYYY-MM-DD")
    for q in data["related"]:
        if q["answer"] not in notes:
            out.append(f"related {q['id']}: its answer {q['answer']} is no note")
        if q["kind"] not in KINDS:
            out.append(f"related {q['id']}: kind {q['kind']!r} is not one of {', '.join(KINDS)}")
    prompts = [q["prompt"].strip() for part in ("related", "unrelated") for q in data[part]]
    for q in data["related"] + data["unrelated"]:
        if not q["prompt"].strip():
            out.append(f"prompt {q['id']} is empty")
        elif prompts.count(q["prompt"].strip()) > 1:
            out.append(f"prompt {q['id']} is asked twice: {q['prompt']!r}")
    return out


def asked_from(data: dict[str, Any]) -> dict[str, str | None]:
    """prompt -> the project of the session asking it: a related prompt from its answer's
    project (none for a general note, the user asking outside any project), the unrelated
    prompts in turn from each of UNRELATED_FROM."""
    project = {n["id"]: n["project"] for n in data["notes"]}
    out: dict[str, str | None] = {q["prompt"]: project[q["answer"]] for q in data["related"]}
    for i, q in enumerate(data["unrelated"]):
        out[q["prompt"]] = UNRELATED_FROM[i % len(UNRELATED_FROM)]
    return out
