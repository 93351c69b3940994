"""A fake model that "extracts" knowledge deterministically from the prompt it is sent,
so tests can check exactly which turns reached the LLM and where their knowledge landed."""

from __future__ import annotations

import json
import re

from tests.fake_anthropic import Reply, error_reply, text_reply, tool_reply

RULE = re.compile(r"(\w+) rule (\d+) uses value (\d+)")


def prompt_text(body: dict) -> str:
    return json.dumps(body.get("messages", []))


def conversation_text(body: dict) -> str:
    """The slice a request sends, without the known facts and the context around it."""
    text = prompt_text(body)
    if "<conversation>" not in text:
        return text
    return text[text.index("<conversation>"):text.rindex("</conversation>")]


def cues_for(topic: str, n: str) -> object:
    """Cues as a model may send them: a list, the JSON text of one, or a list with junk in
    it (a number, a blank); one of them holds a secret."""
    phrases = [f"{topic} setting number {n}", f"how {topic} behaves for case {n}"]
    shape = int(n) % 3
    if shape == 0:
        return phrases
    if shape == 1:
        return json.dumps(phrases + ["token " + "ghp_" + "L0REfake" * 5])
    return [*phrases, 7, "  "]


def extraction_for(text: str, tag: str = "", cues: bool = False) -> dict:
    facts: dict[str, list[dict]] = {}
    for topic, n, value in RULE.findall(text):
        fact = {"summary": f"{topic} rule {n} uses value {value}{tag}", "importance": "medium",
                "basis": "stated",
                "content": f"The team decided {topic} rule {n} uses value {value}."}
        if cues:
            fact["cues"] = cues_for(topic, n)
        if fact not in facts.setdefault(topic, []):
            facts[topic].append(fact)
    topics = [{"name": f"{topic.title()} rules", "summary": f"Rules of the {topic} domain",
               "importance": "high",
               "concepts": [{"name": f"{topic.title()} rule values", "summary": "Agreed values",
                             "importance": "medium", "facts": found}]}
              for topic, found in facts.items()]
    return {"topics": topics, "corrections": [], "relationships": []}


class KnowledgeModel:
    """Responder for FakeAnthropic. `fail_next` makes the next N calls answer `failure`."""

    def __init__(self, tag_requests: bool = False) -> None:
        self.tag_requests = tag_requests  # mark facts with the request that made them
        self.calls = 0
        self.fail_next = 0
        self.failure: Reply = error_reply(500)
        self.extra: dict = {}
        self.cues = False  # each fact comes with cues (cues_for)

    def __call__(self, body: dict) -> Reply:
        if self.fail_next > 0:
            self.fail_next -= 1
            return self.failure
        if not body.get("tools"):
            return text_reply("ok")
        self.calls += 1
        # Like a model told so: the known facts and the context before the slice are not news.
        answer = extraction_for(conversation_text(body),
                                f" #{self.calls}" if self.tag_requests else "", self.cues)
        for key, value in self.extra.items():
            answer[key] = value
        return tool_reply("record_knowledge", answer)
