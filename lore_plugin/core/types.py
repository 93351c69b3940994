"""Plain frozen value types shared by every layer. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any, Literal

EMBED_DIM = 384
EMBED_BYTES = EMBED_DIM * 4  # a stored vector: little-endian float32
DEPTH_NAMES = ("topic", "concept", "fact")  # depth 0, 1, 2; anything deeper is a detail


# Where a fragment came from: the trust label every answer shows. What the user said outranks
# what the assistant explained, which outranks what an agent stored on its own.
SOURCES = {
    "user": "user said",  # the user's words in a conversation
    "assistant": "assistant",  # the assistant's explanation in a conversation
    "subagent": "subagent",  # a subagent's transcript
    "agent": "agent-stored",  # store_memory: the agent decided to keep it
    "remember": "user, lore remember",  # the user typed it into the CLI
    "viewer": "user, in the viewer",  # the user corrected it in `lore ui`
    "import": "imported",
    "consolidation": "consolidation",  # written by the sleep cycle (merges, re-summaries)
}
BASES = ("stated", "observed", "inferred")  # extraction: said by the user, seen, or guessed
RESUMMARISED_AT = "resummarised_at"  # metadata key: consolidation rewrote this topic's text


def depth_name(depth: int) -> str:
    return DEPTH_NAMES[depth] if depth < len(DEPTH_NAMES) else "detail"


@dataclass(frozen=True)
class Fragment:
    id: str
    content: str
    summary: str
    depth: int
    created_at: float  # unix seconds
    last_accessed: float
    access_count: int
    importance: float
    decay_rate: float  # per day
    last_reinforced: float
    relevance_score: float
    source_session: str | None = None
    superseded_by: str | None = None
    project: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None  # filled by queries that join the hierarchy
    source: str | None = None  # one of SOURCES; None for knowledge kept before provenance
    basis: str | None = None  # one of BASES, for extracted knowledge
    confirmed_at: float | None = None  # when the user confirmed or a conversation restated it
    # Phrases someone might ask for it by, one a line (core/cues.py): searched, never shown.
    cues: str = ""


@dataclass(frozen=True)
class NewFragment:
    """A fragment about to be inserted: what the caller decides; the store fills the rest."""

    content: str
    summary: str
    depth: int
    importance: float = 0.5
    source_session: str | None = None
    project: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float | None = None  # defaults to now
    id: str | None = None  # defaults to a fresh uuid4 hex
    source: str | None = None
    basis: str | None = None
    confirmed_at: float | None = None
    cues: str = ""  # core/cues.clean_cues's form: phrases one a line, searched, never shown


@dataclass(frozen=True)
class Edge:
    id: str
    source: str
    target: str
    kind: str
    weight: float
    created_at: float


@dataclass(frozen=True)
class ScoredFragment:
    fragment: Fragment
    score: float  # final blended score, higher is better
    similarity: float = 0.0  # cosine similarity to the query (0 when not embedded)


@dataclass(frozen=True)
class TreeNode:
    fragment: Fragment
    children: tuple[TreeNode, ...] = ()


@dataclass(frozen=True)
class TopicSummary:
    fragment: Fragment
    fragment_count: int  # descendants, not counting the topic itself


@dataclass(frozen=True)
class Turn:
    """One kept conversational turn from a transcript."""

    role: Literal["user", "assistant", "tool"]  # tool: a call and its outcome (capture/tools.py)
    text: str
    timestamp: str | None = None  # ISO 8601 as written by Claude Code
    uuid: str | None = None
    is_sidechain: bool = False


@dataclass(frozen=True)
class HookEvent:
    """The normalised stdin payload of a Claude Code hook."""

    event: str
    session_id: str
    transcript_path: str | None
    cwd: str | None
    source: str | None = None  # SessionStart
    reason: str | None = None  # SessionEnd
    stop_hook_active: bool = False  # Stop
