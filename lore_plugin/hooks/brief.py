"""The SessionStart memory brief: this project's most important knowledge as text, then its
topics with what each is about, plus anything the user must fix; at most
`[brief] max_chars` characters (2,500 by default). Reads only; never needs the model."""

from __future__ import annotations

from ..core.config import Settings
from ..recall.brief_items import knowledge_items, trusted_for_brief
from ..recall.render import RECALLED_NOTICE, clip, plural, recalled, short_id
from ..safety.frame import neutralise

TYPE_CHECKING = False  # not typing's: the brief runs in a hook
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..recall.memory import Memory

TOPICS = 8
TOPIC_CHARS = 110  # one topic line's name and description
KNOWLEDGE_SHARE = 2 / 3  # of the room left after the tail and the recurring failures
HOW_TO = ("For more, call query_memory(topic, depth=1), then traverse_memory(id, 'children') "
          "to drill down; store_memory records new decisions.")


def topic_lines(memory: Memory, project: str | None) -> list[str]:
    """This project's topics and those of no project, each with its one-line description."""
    found = memory.topics(limit=TOPICS * 3)
    lines = []
    for t in found:
        f = t.fragment
        if not trusted_for_brief(f) or (f.project is not None and f.project != project):
            continue
        about = f.content if f.content and f.content.strip() != f.summary.strip() else ""
        text = f"{f.summary}: {about}" if about else f.summary
        cross = " (cross-project)" if project is not None and f.project is None else ""
        lines.append(f"- [{short_id(f.id)}] {clip(neutralise(text), TOPIC_CHARS)}{cross}")
    return lines[:TOPICS]


def fill(lines: list[str], room: int) -> list[str]:
    """The first lines that fit in `room` characters, newlines counted."""
    taken = []
    for line in lines:
        if len(line) + 1 > room:
            break
        taken.append(line)
        room -= len(line) + 1
    return taken


def session_brief(settings: Settings, cwd: str | None, notes: list[str] | None = None,
                  refresh: Callable[[], None] | None = None) -> str | None:
    """The brief; `notes` (said once, like unread history) always fit in it. `refresh`
    (the hook's) starts a detached read of the hub part when no memory service answered."""
    from ..capture.patterns import brief_lines
    from ..core.project import project_key
    from ..maintenance.status import problems
    from ..recall.memory import Memory

    limit = settings.brief_chars
    known: list[str] = []
    topics: list[str] = []
    recurring: list[str] = []
    total = here = 0
    project = project_key(cwd) if cwd else None
    warnings: list[str] = []
    items: list[tuple[float, str, str]] = []
    from .brief_spaces import hub_part

    hub_read = hub_part(settings, cwd, project, refresh)  # issues 28, 29: asked now, read below
    if settings.db_path.exists():
        memory = Memory(settings.db_path, None, project=project)
        try:
            items = knowledge_items(memory.reader, project)
            topics = topic_lines(memory, project)
            total, here = memory.reader.topic_totals(project)
            # Neutralised before they are measured: the frame's own pass never lengthens them.
            recurring = [neutralise(line) for line in brief_lines(memory.reader, project)]
            warnings = problems(settings, memory.reader)  # on the connection already open
        finally:
            memory.close()
    else:
        warnings = problems(settings)
    hub = hub_read()  # the hub spaces' knowledge, named, and the team's, within a deadline
    notes = [*(notes or []), *hub.notes]
    seen = {fid for _, fid, _ in items}  # a pushed or pulled fragment is in two spaces
    for item in hub.items:
        if item[1] not in seen:
            seen.add(item[1])
            items.append(item)
    items.sort(key=lambda item: item[0], reverse=True)
    known = [line for _, _, line in items]
    team = hub.team
    heads = {line.split("]")[0] for line in team}  # a team note is shown once, with its author
    known = [line for line in known if line.split("]")[0] not in heads]
    tail = [f"Lore needs attention: {clip('; '.join(warnings), 500)}"] if warnings else []
    tail += [clip(note, 400) for note in notes or []]
    if not known and not topics and not recurring and not team:
        return "\n".join(tail) or None
    head = (f"Lore long-term memory: {plural(total, 'topic')}"
            + (f" ({here} from this project)" if here else "") + ".")
    tail.insert(0, HOW_TO)
    frame = len(recalled("", RECALLED_NOTICE))
    budget = limit - frame - len(head) - sum(len(x) + 1 for x in tail) - 1
    # Failures met again and again in this project, and what fixed them: few and the most
    # actionable, so their room is set aside first (at most a quarter).
    shown = fill(["Recurring in this project:", *recurring] if recurring else [], budget // 4)
    shown = shown if len(shown) > 1 else []
    budget -= sum(len(x) + 1 for x in shown)
    shared = fill(team, budget // 3)  # a team's notes, never more than a third
    shared = shared if len(shared) > 1 or (shared and not shared[0].endswith(":")) else []
    budget -= sum(len(x) + 1 for x in shared)
    facts = fill(["What this project's memory holds:", *known] if known else [],
                 int(budget * KNOWLEDGE_SHARE))
    facts = facts if len(facts) > 1 else []
    budget -= sum(len(x) + 1 for x in facts)
    named = fill(["Topics:", *topics] if topics else [], budget)
    named = named if len(named) > 1 else []
    budget -= sum(len(x) + 1 for x in named)
    if facts and budget > 0:  # room the topics left goes to more knowledge
        more = fill(known[len(facts) - 1:], budget)
        facts += more
    body = [head, *facts, *shared, *named, *shown]
    return "\n".join([recalled("\n".join(body)), *tail])[:limit]
