"""Implicit usefulness (issue 17): which recalled fragments the assistant went on to use.

A recall is a Lore tool answer that carries fragment ids (`[abc123def456]`): a tool_result of
query_memory, explore_memory or traverse_memory, or a UserPromptSubmit hook's
additionalContext (recorded as an `attachment` line of type hook_additional_context). The
brief and list_topics are left out: they are tables of contents shown whatever the question,
so not using them says nothing. store_memory's answer is the agent's own write.

The rule, per recalled fragment, over what the assistant wrote after the recall until the
next request of the user (its text and its tool inputs, so a follow-up traverse_memory(id)
counts):
- used when its id (12 characters, as shown) appears there, or
- when at least min(2, n) of its n distinctive words appear there. Its distinctive words are
  those of its summary and content that are no stopword, at least four letters long or
  holding a digit, and appear neither in the question (the tool's input, or the user's
  request for a hook) nor in any other fragment of the same answer: the words that set it
  apart from its fellow results, so a sibling sharing the shape of a used fragment is not
  counted as used by accident.
- otherwise ignored.
Recalls whose answer falls across two ingested slices are judged on the part in the slice."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import relevance as rel
from ..store import BusyError, StoreError
from .lines import _parse, _user_request_text

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger(__name__)
TOOL_PREFIX = "mcp__plugin_lore_memory__"
RECALL_TOOLS = {TOOL_PREFIX + name for name in ("query_memory", "explore_memory",
                                                "traverse_memory")}
ID_SHOWN = re.compile(r"\[([0-9a-f]{12})\]")
WORD = re.compile(r"[a-z0-9][a-z0-9_]*")
WORDS_NEEDED = 2
STOPWORDS = frozenset("""
about above after again also always among another because been before being below between
both cannot could does doing down during each every from further have having here into itself
just more most much must never only other ought over same should since some such than that
their them then there these they this those through under until very want were what when
where which while will with within without would your yours uses used using make made""".split())
CONTENT_SEEN = 300  # render.CONTENT_CHARS: the part of the content the answer showed


@dataclass
class Recall:
    shown: list[str]  # short ids, in the order the answer listed them
    question: str
    after: list[str] = field(default_factory=list)  # what the assistant wrote next
    counted: bool = True  # the recall reinforced what it returned (tools do; the hook not)


def _words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower())
            if w not in STOPWORDS and (len(w) >= 4 or any(c.isdigit() for c in w))}


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):  # text blocks (tool results) or strings (hook context)
        return [b if isinstance(b, str) else b["text"] for b in content
                if isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str))]
    return []


def recalls_in(path: Path, start: int, end: int) -> list[Recall]:
    """The recalls in the transcript's bytes [start, end), each with what followed it."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(max(end - start, 0))
    except OSError:
        return []
    found: list[Recall] = []
    open_: list[Recall] = []  # recalls still collecting the assistant's answer
    asked: dict[str, str] = {}  # tool_use id -> the recall tool's input
    request = ""
    for raw in data.split(b"\n"):
        obj = _parse(raw) if raw.strip() else None
        if obj is None:
            continue
        try:
            request = _follow(obj, found, open_, asked, request)
        except (TypeError, ValueError, AttributeError):  # a known type in an unknown shape
            continue
    return found


def _follow(obj: dict[str, Any], found: list[Recall], open_: list[Recall],
            asked: dict[str, str], request: str) -> str:
    kind, message = obj.get("type"), obj.get("message")
    if kind == "assistant" and isinstance(message, dict):
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                written = str(block.get("text", ""))
            elif block.get("type") == "tool_use":
                written = json.dumps(block.get("input"), ensure_ascii=False)
                if block.get("name") in RECALL_TOOLS:
                    asked[str(block.get("id"))] = written
            else:
                continue
            for recall in open_:
                recall.after.append(written)
    elif kind == "user" and isinstance(message, dict):
        text = _user_request_text(obj)
        if text is not None:  # the user speaks again: earlier recalls are judged
            open_.clear()
            return text
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result" \
                    and block.get("tool_use_id") in asked:
                _opened(found, open_, "\n".join(_texts(block.get("content"))),
                        asked.pop(block["tool_use_id"]))
    elif kind == "attachment" and isinstance(obj.get("attachment"), dict):
        att = obj["attachment"]
        if att.get("type") == "hook_additional_context" and att.get("hookEvent") == "UserPromptSubmit":
            _opened(found, open_, "\n".join(_texts(att.get("content"))), request, False)
    return request


def _opened(found: list[Recall], open_: list[Recall], answer: str, question: str,
            counted: bool = True) -> None:
    shown = list(dict.fromkeys(ID_SHOWN.findall(answer)))
    if shown:
        recall = Recall(shown, question, counted=counted)
        found.append(recall)
        open_.append(recall)


def judge(recall: Recall, texts: dict[str, str]) -> list[str]:
    """The short ids of `recall` the assistant used; `texts` holds each one's summary and
    shown content (ids missing from it, forgotten since, are skipped)."""
    after = "\n".join(recall.after)
    said = _words(after)
    question = _words(recall.question)
    own = {sid: _words(texts[sid]) - question for sid in recall.shown if sid in texts}
    used = []
    for sid, words in own.items():
        others = set().union(*(w for o, w in own.items() if o != sid))
        distinctive = words - others
        if sid in after or (distinctive and len(distinctive & said)
                            >= min(WORDS_NEEDED, len(distinctive))):
            used.append(sid)
    return used


def apply_recall_use(store: Store, recalls: list[Recall], now: float) -> int:
    """Records what each recall returned and what was used, and moves the fragments'
    memory state (relevance.credit_use, relevance.penalise_ignored). Meant to run inside the
    ingestor's write, with the watermark, so a slice is judged exactly once. Returns how
    many fragments were judged used. Best effort: a failure here is logged and never costs
    the slice its knowledge (the counters of a half-judged slice are all that can be lost)."""
    if not recalls:
        return 0
    try:
        return _apply(store, recalls, now)
    except (StoreError, BusyError):
        raise  # the database itself failed: the whole write is retried
    except Exception as exc:
        log.warning("could not judge the recalls of this slice: %s", exc)
        return 0


def _apply(store: Store, recalls: list[Recall], now: float) -> int:
    short = {sid for r in recalls for sid in r.shown}
    full = store.ids_by_prefix(sorted(short))
    frags = store.get_many(list(full.values()))
    texts = {sid: f"{frags[fid].summary}\n{frags[fid].content[:CONTENT_SEEN]}"
             for sid, fid in full.items() if fid in frags}
    used_total = 0
    for recall in recalls:
        used = set(judge(recall, texts))
        returned = [full[s] for s in recall.shown if s in texts]
        store.record_recall_use(returned, [full[s] for s in used], now)
        states = {}
        used_ids = {full[s] for s in used}
        current = store.get_many(returned, with_text=False, with_parent=False)
        for fid, f in current.items():
            state = rel.MemoryState(f.access_count, f.decay_rate, f.last_accessed,
                                    f.last_reinforced)
            if fid in used_ids:
                state = rel.credit_use(state, now)
            else:
                state = rel.penalise_ignored(state, store.recall_use(fid)[2], recall.counted)
            states[fid] = (state, rel.relevance(f.importance, state.access_count,
                                                state.decay_rate, state.last_reinforced, now))
        store.save_memory_states(states)
        used_total += len(used)
    return used_total
