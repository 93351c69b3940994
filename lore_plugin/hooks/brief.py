"""The SessionStart memory brief: this project's most important knowledge as text, then its
topics with what each is about, plus anything the user must fix; at most
`[brief] max_chars` characters (2,500 by default). Reads only; never needs the model."""

from __future__ import annotations

from ..core.config import Settings
from ..core.types import Fragment
from ..recall.render import RECALLED_NOTICE, clip, plural, recalled, short_id, source_label
from ..safety.frame import neutralise

TYPE_CHECKING = False  # not typing's: the brief runs in a hook
if TYPE_CHECKING:
    from ..recall.memory import Memory
    from ..store import Store

TOPICS = 8
CANDIDATES = 100  # knowledge rows read, the most important first; the brief shows a dozen
ITEM_CHARS = 160  # one knowledge line's text
TOPIC_CHARS = 110  # one topic line's name and description
KNOWLEDGE_SHARE = 2 / 3  # of the room left after the tail and the recurring failures
USER_SOURCES = ("user", "remember", "viewer")  # the user's own words
HOW_TO = ("For more, call query_memory(topic, depth=1), then traverse_memory(id, 'children') "
          "to drill down; store_memory records new decisions.")


def trusted_for_brief(frag: Fragment) -> bool:
    """The brief is read before the user says anything, so it holds only knowledge the user
    stands behind: what an agent stored on its own or the extractor inferred stays out until
    the user confirms it or a later conversation restates it."""
    return frag.confirmed_at is not None or (frag.source != "agent" and frag.basis != "inferred")


def rank(frag: Fragment, recalled_times: int, used_times: int, project: str | None) -> float:
    """Which knowledge the brief shows first. What the user stated or confirmed (conventions,
    decisions, commands, preferences, gotchas) leads, then importance and relevance; a note
    the assistant kept using after recalls gains, one it kept ignoring loses; this project's
    own knowledge goes before knowledge of no project."""
    score = frag.importance + 0.2 * min(frag.relevance_score, 1.0)
    if frag.basis == "stated" or frag.source in USER_SOURCES or frag.confirmed_at is not None:
        score += 0.5
    if recalled_times >= 3:
        score += 0.3 * used_times / recalled_times - (0.2 if not used_times else 0.0)
    if project is not None and frag.project == project:
        score += 0.1
    return score


def _label(frag: Fragment, project: str | None, space: str = "local") -> str:
    cross = ", cross-project" if project is not None and frag.project is None else ""
    where = f", space: {space}" if space != "local" else ""  # a hub space is named
    return f"from: {source_label(frag)}{cross}{where}"


def knowledge_items(reader: Store, project: str | None, space: str = "local"
                    ) -> list[tuple[float, str, str]]:
    """(rank, id, line) per item of one space, best first."""
    rows = reader.knowledge_of(project, CANDIDATES)
    kept = [(rank(f, r, u, project), f) for f, r, u in rows if trusted_for_brief(f)]
    kept.sort(key=lambda pair: pair[0], reverse=True)
    items = []
    for score, f in kept:
        text = f.summary
        if f.content and f.content.strip() != f.summary.strip():
            text += " — " + f.content
        # Neutralised before it is measured: the frame's own pass then never lengthens it.
        items.append((score, f.id, f"- [{short_id(f.id)}] {clip(neutralise(text), ITEM_CHARS)} "
                                   f"({_label(f, project, space)})"))
    return items


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


def session_brief(settings: Settings, cwd: str | None, notes: list[str] | None = None
                  ) -> str | None:
    """The brief; `notes` (said once, like unread history) always fit in it."""
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
    from .team_brief import team_lines

    team_read = team_lines(settings, cwd, project)  # issue 29: started now, read below
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
    if settings.hub_url:  # the hub spaces' knowledge, named, within a deadline
        from .brief_spaces import hub_knowledge

        items, missed = hub_knowledge(settings, project, items, knowledge_items)
        notes = [*(notes or []), *missed]
    known = [line for _, _, line in items]
    team = team_read()  # issue 29: the repository's team space, read meanwhile
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
