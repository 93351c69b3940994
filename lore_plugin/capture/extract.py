"""The extraction contract (design §6): the `record_knowledge` tool, and validation. The
prompt itself is prompt.py's.

The LLM answers by calling `record_knowledge`. Each topic, correction, relationship and
failure of an answer is validated on its own: an invalid one is dropped with a log line and
the rest kept. Only an answer with nothing usable at all raises LLMError, so the caller keeps
the watermark and retries the batch later. Only pydantic is imported: the LLM itself arrives
as an argument (see llm/client.py).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from ..core.errors import LLMError
from .prompt import HIGH_PER_CALL, MAX_LISTED_TOPICS, SYSTEM_PROMPT, build_prompt, escape_data

__all__ = ["MAX_LISTED_TOPICS", "RECORD_KNOWLEDGE_TOOL", "SCOPES", "SYSTEM_PROMPT", "Extraction",
           "build_prompt", "escape_data", "extract_knowledge", "parse_extraction",
           "strongest_basis", "worth_extracting"]
log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..core.types import Turn
    from ..llm.client import LLM

# Generous limits: they exist to reject garbage (a whole transcript pasted into a name), not
# to police style, because one over-long field rejects the whole batch.
NAME_MAX = 200
SUMMARY_MAX = 1_000
CONTENT_MAX = 20_000
EXTRACTION_MAX_TOKENS = 8192  # a 20-turn batch's hierarchy; stays under the SDK's non-streaming cap


def _blank_to_none(value: Any) -> Any:
    # An empty optional `content` means "nothing more to say", not a malformed answer.
    return None if isinstance(value, str) and not value.strip() else value


def _null_to_empty(value: Any) -> Any:
    return [] if value is None else _json_array(value)


def _json_array(value: Any) -> Any:
    # A known model quirk: an array sent as the JSON text of an array.
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _phrases(value: Any) -> Any:
    # Cues only help find a fact: whatever shape they come in, they never cost it. A JSON
    # text of an array is read, a lone phrase kept, anything not text dropped
    # (core/cues.clean_cues bounds and normalises them where they are stored).
    value = _json_array(value)
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=NAME_MAX)]
Summary = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=SUMMARY_MAX)
]
_ContentText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=CONTENT_MAX)]
Content = Annotated[_ContentText | None, BeforeValidator(_blank_to_none)]
Importance = Annotated[Literal["high", "medium", "low"], BeforeValidator(_lower)]
def _known_basis(value: Any) -> Any:
    # A missing or odd basis is no reason to lose the fact, but no evidence either: what the
    # model did not say it saw or was told is a guess, and a guess never overrides a statement.
    value = _lower(value)
    return value if value in ("stated", "observed", "inferred") else "inferred"


Basis = Annotated[Literal["stated", "observed", "inferred"], BeforeValidator(_known_basis)]
SCOPES = ("project", "personal", "other", "general")  # what a fact is about (issue 29)


def _known_scope(value: Any) -> Any:
    # Unsaid or odd is None, never "project": only what the model says is about the
    # session's project may ever be shared with a team (capture/sharing.py).
    value = _lower(value)
    return value if value in SCOPES else None


Scope = Annotated[Literal["project", "personal", "other", "general"] | None,
                  BeforeValidator(_known_scope)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Detail(_Model):
    summary: Summary
    content: Content = None
    importance: Importance
    basis: Basis = "inferred"


class Fact(_Model):
    summary: Summary
    content: Content = None
    importance: Importance
    basis: Basis = "inferred"
    scope: Scope = None
    details: Annotated[list[Detail], BeforeValidator(_null_to_empty)] = []
    cues: Annotated[list[str], BeforeValidator(_phrases)] = []  # searched, never shown


class Concept(_Model):
    name: Name
    summary: Summary
    content: Content = None
    importance: Importance
    facts: Annotated[list[Fact], BeforeValidator(_json_array)]


class Topic(_Model):
    name: Name
    summary: Summary
    content: Content = None
    importance: Importance
    concepts: Annotated[list[Concept], BeforeValidator(_json_array)]


def _id_or_none(value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return str(value).strip().strip("[]").strip() if isinstance(value, str | int) else value


class Correction(_Model):
    old: Summary
    new: Summary
    topic: Name
    id: Annotated[str | None, BeforeValidator(_id_or_none)] = None  # a [k3] of known_facts


class Relationship(_Model):
    source: Summary = Field(alias="from")
    target: Summary = Field(alias="to")
    reason: Summary


class Failure(_Model):
    """Something that broke in the session (issue 17, the rule of three): recorded apart from
    the hierarchy, so that consolidation can notice the same kind of failure recurring."""

    what: Summary  # what broke, in a line that makes sense alone
    kind: Name  # the error kind: an exception name, an exit status, a tool's error code
    fix: Content = None  # what made it work, when the session found it


class Extraction(_Model):
    topics: list[Topic]
    corrections: Annotated[list[Correction], BeforeValidator(_null_to_empty)] = []
    relationships: Annotated[list[Relationship], BeforeValidator(_null_to_empty)] = []
    failures: Annotated[list[Failure], BeforeValidator(_null_to_empty)] = []


# --- the tool schema, written out so the model (and `claude --json-schema`) see plain JSON Schema.
# It is sent with every call, so descriptions are few and short: the system prompt explains.


def _string(description: str = "") -> dict[str, Any]:
    # The length limits stay with the validation above: limits the model never nears are not
    # worth their tokens on every call.
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if description:
        schema["description"] = description
    return schema


def _node(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


_IMPORTANCE = {"type": "string", "enum": ["high", "medium", "low"]}
_BASIS = {"type": "string", "enum": ["stated", "observed", "inferred"]}
_SCOPE = {"type": "string", "enum": list(SCOPES)}
_CONTENT = _string("optional specifics")
_DETAIL = _node({"summary": _string(), "content": _CONTENT, "importance": _IMPORTANCE,
                 "basis": _BASIS}, ["summary", "importance", "basis"])
_FACT = _node(
    {"summary": _string("one self-contained statement"), "content": _CONTENT,
     "importance": _IMPORTANCE, "basis": _BASIS, "scope": _SCOPE,
     "cues": {"type": "array", "items": {"type": "string"},
              "description": "3-6 short phrases someone might ask for it by, in other words"},
     "details": {"type": "array", "items": _DETAIL}},
    ["summary", "importance", "basis", "scope"],
)
_CONCEPT = _node(
    {"name": _string(), "summary": _string(), "content": _CONTENT,
     "importance": _IMPORTANCE, "facts": {"type": "array", "items": _FACT}},
    ["name", "summary", "importance", "facts"],
)
_TOPIC = _node(
    {"name": _string(), "summary": _string(), "content": _CONTENT,
     "importance": _IMPORTANCE, "concepts": {"type": "array", "items": _CONCEPT}},
    ["name", "summary", "importance", "concepts"],
)
_CORRECTION = _node({"id": _string("the known fact's id, e.g. k3"), "old": _string(),
                     "new": _string(), "topic": _string()}, ["old", "new", "topic"])
_RELATIONSHIP = _node({"from": _string(), "to": _string(),
                       "reason": _string()}, ["from", "to", "reason"])
_FAILURE = _node({"what": _string(), "kind": _string(), "fix": _string()}, ["what", "kind"])

RECORD_KNOWLEDGE_TOOL: dict[str, Any] = {
    "name": "record_knowledge",
    "description": "Record the durable knowledge of a conversation; call it exactly once.",
    "input_schema": _node(
        {
            "topics": {"type": "array", "items": _TOPIC},
            "corrections": {"type": "array", "items": _CORRECTION},
            "relationships": {"type": "array", "items": _RELATIONSHIP},
            "failures": {"type": "array", "items": _FAILURE},
        },
        ["topics"],
    ),
}

# A request with nothing to remember in it: a greeting, thanks, a go-ahead, a bare command.
_SMALL_TALK = re.compile(
    r"(?:hi|hello|hey|good (?:morning|afternoon|evening)|thanks?(?: you)?|thx|ty|ok(?:ay)?|k"
    r"|yes|yeah|yep|no|nope|sure|great|cool|nice|perfect|good|done|lgtm|looks good|continue"
    r"|go on|go ahead|proceed|next|carry on|keep going)"
    r"(?:\s+(?:there|again|so much|a lot|please|thanks|mate))*[\s!.?,:)]*", re.IGNORECASE)
MIN_ASSISTANT_CHARS = 400  # below this, an assistant's lines are narration and replies


def _substantive(text: str) -> bool:
    text = text.strip()
    if not text or _SMALL_TALK.fullmatch(text):
        return False
    return not (text.startswith("/") and len(text.split()) == 1)  # a bare slash command


def worth_extracting(turns: list[Turn]) -> bool:
    """False for a slice with nothing to remember, which is not sent at all: no request of
    substance (tool lines never count; greetings, thanks and go-aheads are not one) and
    no more than a few lines from the assistant."""
    if any(t.role == "user" and _substantive(t.text) for t in turns):
        return True
    return sum(len(t.text) for t in turns if t.role == "assistant") >= MIN_ASSISTANT_CHARS


def _problems(error: ValidationError, prefix: str) -> list[str]:
    return [f"{'.'.join([prefix, *(str(p) for p in item['loc'])])}: {item['msg']}"
            for item in error.errors()]


def _describe(problems: list[str], limit: int = 3) -> str:
    more = len(problems) - limit
    return "; ".join(problems[:limit]) + (f" (and {more} more)" if more > 0 else "")


_LISTS: dict[str, type[_Model]] = {"topics": Topic, "corrections": Correction, "relationships": Relationship,
          "failures": Failure}


def parse_extraction(data: dict[str, Any]) -> Extraction:
    """Validate a record_knowledge answer item by item: an invalid topic, correction,
    relationship or failure is dropped with a log line, the rest kept. LLMError only when
    nothing usable is left of an answer that held something, or it is not an answer at all."""
    if not isinstance(data, dict):
        raise LLMError(f"record_knowledge answer must be an object, got {type(data).__name__}")
    if "topics" not in data:
        raise LLMError("malformed record_knowledge answer: topics: Field required")
    kept: dict[str, list[Any]] = {}
    problems: list[str] = []
    offered = dropped = 0
    for name, model in _LISTS.items():
        items = _null_to_empty(data.get(name))
        if not isinstance(items, list):
            problems.append(f"{name}: Input should be a valid list")
            continue
        offered += len(items)
        kept[name] = []
        for index, item in enumerate(items):
            try:
                kept[name].append(model.model_validate(item))
            except ValidationError as exc:
                dropped += 1
                problems += _problems(exc, f"{name}.{index}")
    if problems:
        if (offered and not any(kept.values())) or "topics" not in kept:
            raise LLMError(f"malformed record_knowledge answer: {_describe(problems)}")
        log.warning("dropped %d invalid part(s) of a record_knowledge answer: %s",
                    dropped, _describe(problems))
    # Every item is validated already; the lists a partial answer lacks are empty.
    kept["topics"] = _bounded_high(kept.get("topics", []))
    return Extraction.model_construct(None, **{k: kept.get(k, []) for k in _LISTS})


def _bounded_high(topics: list[Topic], quota: int = HIGH_PER_CALL) -> list[Topic]:
    """The prompt asks for at most `quota` "high" facts a call; a model that marks more has
    its first ones kept high (those the user stated before the rest) and the others medium,
    so that one eager answer cannot crowd the brief with "important" knowledge."""
    facts = [f for t in topics for c in t.concepts for f in c.facts if f.importance == "high"]
    facts.sort(key=lambda f: f.basis != "stated")  # stable: the answer's order within a basis
    keep = {id(f) for f in facts[:quota]}
    if len(facts) <= quota:
        return topics

    def fact(f: Fact) -> Fact:
        if f.importance != "high" or id(f) in keep:
            return f
        return f.model_copy(update={"importance": "medium"})

    return [t.model_copy(update={"concepts": [c.model_copy(update={
        "facts": [fact(f) for f in c.facts]}) for c in t.concepts]}) for t in topics]


def extract_knowledge(llm: LLM, conversation_text: str, existing_topics: list[str], *,
                      known: Sequence[str] = (), context: str = "", project: str | None = None,
                      date: str | None = None) -> Extraction:
    """One LLM call; retrying a failed batch is the caller's job."""
    system, prompt = build_prompt(conversation_text, existing_topics, known=known,
                                  context=context, project=project, date=date)
    data = llm.call_tool(
        system=system, prompt=prompt, tool=RECORD_KNOWLEDGE_TOOL, max_tokens=EXTRACTION_MAX_TOKENS
    )
    return parse_extraction(data)


def strongest_basis(facts: list[Fact]) -> str:
    """A topic or concept is as well founded as the best fact under it: one thing the user
    said makes it stated; a branch of nothing but guesses stays inferred."""
    bases = {f.basis for f in facts} | {d.basis for f in facts for d in f.details}
    for basis in ("stated", "observed"):
        if basis in bases:
            return basis
    return "inferred" if bases else "observed"
