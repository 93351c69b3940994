"""What of an extraction a team may see (issue 29): the rule, per fact, and the split of one
extraction into the part for the team space and the part that stays the member's own.

In a repository that opted in (core/teamconfig.py), a fact is shared only when all hold:
- the extractor says it is about the session's project (`scope` "project"), not a personal
  preference, another project or general knowledge; a fact it did not classify stays local;
- it was stated by the user or observed in the session (`basis`), not inferred;
- redaction never touched it: not its text now (redact() would change it), and not the
  transcript it came from (the conversation is redacted before the model reads it, so a
  secret there reaches the answer as a `[REDACTED:...]` or `[PRIVATE]` marker).
A detail follows the same rule under a shared fact; one that fails it stays local, as a fact
of the same concept. A topic or concept whose own name or text redaction touched takes all
its facts local. A correction goes to the team space too when the new fact it states is
shared (the same words): there it supersedes the teammate's fact it names, if the space holds
one (capture/ingest.py), and the database records both authors (hub/correct_sql.py); the
member's own copy of the correction stays local as before. Relationships and failures stay
local."""

from __future__ import annotations

from ..safety.redact import PRIVATE_MARKER, marker, redact
from .extract import Concept, Detail, Extraction, Fact, Topic

SHARED_BASES = ("stated", "observed")
_MARKS = (marker(""), PRIVATE_MARKER)  # "[REDACTED:" prefix (kind cut off) and "[PRIVATE]"


def redaction_touched(*texts: str | None) -> bool:
    """True when a text holds a redaction marker or redacting it would change it."""
    for text in texts:
        if not text:
            continue
        if any(m.rstrip("]") in text for m in _MARKS) or redact(text) != text:
            return True
    return False


def why_local(basis: str, scope: str | None, *texts: str | None) -> str | None:
    """Why a fact or detail stays local, or None when it may be shared."""
    if basis not in SHARED_BASES:
        return f"{basis} knowledge stays local"
    if scope != "project":
        return f"about {'nothing said' if scope is None else scope}, not this repository"
    if redaction_touched(*texts):
        return "redaction touched it"
    return None


def _fact_split(fact: Fact) -> tuple[Fact | None, list[Fact]]:
    """(the fact as shared with its shareable details, or None; what stays local)."""
    if why_local(fact.basis, fact.scope, fact.summary, fact.content):
        return None, [fact]
    shared_details: list[Detail] = []
    local: list[Fact] = []
    for detail in fact.details:
        if why_local(detail.basis, fact.scope, detail.summary, detail.content):
            local.append(Fact(summary=detail.summary, content=detail.content,
                              importance=detail.importance, basis=detail.basis,
                              scope=fact.scope))
        else:
            shared_details.append(detail)
    return fact.model_copy(update={"details": shared_details}), local


def _node_clean(node: Topic | Concept) -> bool:
    return not redaction_touched(node.name, node.summary, node.content)


def split(extraction: Extraction) -> tuple[Extraction, Extraction]:
    """(what goes to the team space, what stays local). A topic or concept appears in both
    when its facts do: each space keeps its own hierarchy."""
    shared_topics: list[Topic] = []
    local_topics: list[Topic] = []
    for topic in extraction.topics:
        shared_concepts: list[Concept] = []
        local_concepts: list[Concept] = []
        for concept in topic.concepts:
            clean = _node_clean(topic) and _node_clean(concept)
            shared_facts: list[Fact] = []
            local_facts: list[Fact] = []
            for fact in concept.facts:
                shared, local = _fact_split(fact) if clean else (None, [fact])
                if shared is not None:
                    shared_facts.append(shared)
                local_facts += local
            if shared_facts:
                shared_concepts.append(concept.model_copy(update={"facts": shared_facts}))
            if local_facts or not concept.facts:
                local_concepts.append(concept.model_copy(update={"facts": local_facts}))
        if shared_concepts:
            shared_topics.append(topic.model_copy(update={"concepts": shared_concepts}))
        if local_concepts or not topic.concepts:
            local_topics.append(topic.model_copy(update={"concepts": local_concepts}))
    said = {f.summary.strip().lower() for t in shared_topics for c in t.concepts
            for f in c.facts}
    corrections = [c for c in extraction.corrections if c.new.strip().lower() in said]
    team = Extraction.model_construct(None, topics=shared_topics, corrections=corrections,
                                      relationships=[], failures=[])
    return team, extraction.model_copy(update={"topics": local_topics})


def shared_count(extraction: Extraction) -> int:
    return sum(len(c.facts) for t in extraction.topics for c in t.concepts)
