"""The SessionStart brief's knowledge lines, read from one space: the local file (the hook
reads it) or a hub space (the memory service reads it, hooks/brief_spaces.py asks). One
place, so that a line reads the same whoever built it.

Each line is neutralised before it is measured (the frame's own pass then never lengthens
it) and carries its provenance; a hub space is named, the local file is not."""

from __future__ import annotations

from ..core.types import Fragment
from ..safety.frame import neutralise
from .render import authored_label, clip, short_id, source_label

TYPE_CHECKING = False  # not typing's: the brief runs in a hook
if TYPE_CHECKING:
    from ..store import Store

CANDIDATES = 100  # knowledge rows read, the most important first; the brief shows a dozen
TEAM_CANDIDATES = 60
ITEM_CHARS = 160  # one knowledge line's text
USER_SOURCES = ("user", "remember", "viewer")  # the user's own words
LOCAL = "local"

Item = tuple[float, str, str]  # (rank, id, line)


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


def _text(frag: Fragment) -> str:
    text = frag.summary
    if frag.content and frag.content.strip() != frag.summary.strip():
        text += " — " + frag.content
    return text


def _label(frag: Fragment, project: str | None, space: str = LOCAL) -> str:
    cross = ", cross-project" if project is not None and frag.project is None else ""
    where = f", space: {space}" if space != LOCAL else ""  # a hub space is named
    return f"from: {source_label(frag)}{cross}{where}"


def knowledge_items(reader: Store, project: str | None, space: str = LOCAL) -> list[Item]:
    """(rank, id, line) per item of one space, best first."""
    rows = reader.knowledge_of(project, CANDIDATES)
    kept = [(rank(f, r, u, project), f) for f, r, u in rows if trusted_for_brief(f)]
    kept.sort(key=lambda pair: pair[0], reverse=True)
    return [(score, f.id, f"- [{short_id(f.id)}] {clip(neutralise(_text(f)), ITEM_CHARS)} "
                          f"({_label(f, project, space)})") for score, f in kept]


def team_lines(store: object, space: str, project: str | None) -> list[str]:
    """A team space's part of the brief (issue 29): its heading, then its most important
    trusted knowledge of `project`, each line with its author, the role the database stamped
    on it ("from: alice, stated"); [] when it holds nothing to show. `store` is a HubStore
    (knowledge_of and authors)."""
    rows = [f for f, _, _ in store.knowledge_of(project, TEAM_CANDIDATES)  # type: ignore[attr-defined]
            if trusted_for_brief(f)]
    authors = store.authors([f.id for f in rows])  # type: ignore[attr-defined]
    lines = [f"- [{short_id(f.id)}] {clip(neutralise(_text(f)), ITEM_CHARS)} "
             f"({authored_label(f, neutralise(authors.get(f.id, 'unknown')))})" for f in rows]
    return [f"From the team space {space}:", *lines] if lines else []
