"""The SessionStart memory brief: what Lore knows that matters here, in under 1,500
characters, plus anything the user must fix. Reads only; never needs the model."""

from __future__ import annotations

from ..core.config import Settings
from ..core.types import Fragment
from ..recall.render import RECALLED_NOTICE, clip, plural, recalled, short_id, source_label
from ..safety.frame import neutralise

LIMIT = 1500
TOPICS = 8
HOW_TO = ("Before answering about earlier work, decisions or this codebase, call "
          "query_memory(topic, depth=1), then traverse_memory(id, 'children') to drill down; "
          "store_memory records new decisions.")


def trusted_for_brief(frag: Fragment) -> bool:
    """The brief is read before the user says anything, so it holds only knowledge the user
    stands behind: what an agent stored on its own or the extractor inferred stays out until
    the user confirms it or a later conversation restates it."""
    return frag.confirmed_at is not None or (frag.source != "agent" and frag.basis != "inferred")


def session_brief(settings: Settings, cwd: str | None, notes: list[str] | None = None
                  ) -> str | None:
    """The brief; `notes` (said once, like unread history) always fit in it."""
    from ..capture.patterns import brief_lines
    from ..core.project import project_key
    from ..maintenance.status import problems
    from ..recall.memory import Memory

    topics = []
    recurring: list[str] = []
    total = here = 0
    project = project_key(cwd) if cwd else None
    warnings: list[str] = []
    if settings.db_path.exists():
        memory = Memory(settings.db_path, None, project=project)
        try:
            # Ask for more than are shown: untrusted topics are dropped below.
            topics = [t for t in memory.topics(limit=TOPICS * 3)
                      if trusted_for_brief(t.fragment)][:TOPICS]
            total, here = memory.reader.topic_totals(project)
            # Neutralised before they are measured: the frame's own pass never lengthens them.
            recurring = [neutralise(line) for line in brief_lines(memory.reader, project)]
            warnings = problems(settings, memory.reader)  # on the connection already open
        finally:
            memory.close()
    else:
        warnings = problems(settings)
    tail = [f"Lore needs attention: {clip('; '.join(warnings), 500)}"] if warnings else []
    tail += [clip(note, 400) for note in notes or []]
    if not topics and not recurring:
        return "\n".join(tail) or None
    head = (f"Lore long-term memory: {plural(total, 'topic')}"
            + (f" ({here} from this project)" if here else "") + ". Top topics:")
    tail.insert(0, HOW_TO)
    body: list[str] = []
    frame = len(recalled("", RECALLED_NOTICE))
    budget = LIMIT - frame - len(head) - sum(len(x) + 1 for x in tail) - 1
    # Failures met again and again in this project, and what fixed them: their room is set
    # aside before the topics fill the rest, as they are few and the most actionable (at most
    # half of it).
    room = budget // 2
    shown = []
    for line in ["Recurring in this project:", *recurring] if recurring else []:
        if len(line) + 1 > room:
            break
        shown.append(line)
        room -= len(line) + 1
    shown = shown if len(shown) > 1 else []
    budget -= sum(len(x) + 1 for x in shown)
    for t in topics:
        line = (f"- [{short_id(t.fragment.id)}] {clip(neutralise(t.fragment.summary), 70)} "
                f"({plural(t.fragment_count, 'fragment')}, from: {source_label(t.fragment)})")
        if len(line) + 1 > budget:
            break
        body.append(line)
        budget -= len(line) + 1
    body += shown
    return "\n".join([recalled("\n".join([head, *body])), *tail])[:LIMIT]
