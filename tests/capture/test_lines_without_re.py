"""The Stop hook's count and the text cleaning find what the regexes they replace found.

lines.py looks for request markers with bytes.find and runs each cleaning regex only where a
plain string test says it can match; both are checked here against the plain regex versions,
on texts built to sit on every edge (spellings, near misses, runs of exactly 99 and 100)."""

from __future__ import annotations

import json
import random
import re

from lore_plugin.capture import lines

REQUEST_MARKER = re.compile(rb'"type": ?"(?:user|queued_command)"')  # what the count used


def regex_count(data: bytes) -> int:
    """The count as it was: a regex pass for the markers, the same judging of each line."""
    end = data.rfind(b"\n") + 1
    count, pos = 0, 0
    while pos < end:
        match = REQUEST_MARKER.search(data, pos, end)
        if match is None:
            break
        line_start = data.rfind(b"\n", pos, match.start()) + 1 or pos
        line_end = data.find(b"\n", match.end(), end)
        pos = line_end + 1
        if data.find(b'"tool_use_id"', line_start, line_end) >= 0:
            continue
        obj = lines._parse(data[line_start:line_end])
        if obj is not None and (lines._user_request_text(obj) or lines._queued_prompt_text(obj)):
            count += 1
    return count


def some_line(rng: random.Random) -> bytes:
    text = rng.choice(["fix the build", "", "<system-reminder>x</system-reminder>",
                       'he said "type":"user" twice', "a\n\n\n\nb"])
    kind = rng.choice(["user", "assistant", "users", "queued_command", "attachment"])
    obj: dict = {"type": kind, "message": {"role": "user", "content": text}}
    if kind == "queued_command":
        obj = {"type": "attachment", "attachment": {"type": "queued_command", "prompt": text}}
    if rng.random() < 0.2:
        obj["message"] = {"content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    raw = json.dumps(obj, separators=rng.choice([(",", ":"), (", ", ": "), (",", ":  ")]))
    return raw.encode()


def test_the_find_based_count_agrees_with_the_regex_count():
    rng = random.Random(27)
    for _ in range(300):
        chunks = [some_line(rng) for _ in range(rng.randint(0, 12))]
        data = b"\n".join(chunks) + rng.choice([b"\n", b"", b'\n{"type":"user"'])
        assert lines._count_requests(data, 0, len(data)) == regex_count(data), data


def regex_clean(text: str) -> str:
    """clean_text with every regex always run, as it was before the plain-string guards."""
    p = lines._patterns()
    if "<" in text:
        text = p.noise_block.sub("", text)
        if "<command-" in text:
            text = lines._render_command(text)
        if "<bash-input>" in text:
            text = p.bash_input.sub(lambda m: "! " + m.group(1).strip(), text)
    if "base64," in text:
        text = p.data_uri.sub(lines.BASE64_MARKER, text)
    if len(text) >= 100:
        text = p.base64_run.sub(lines._base64_or_keep, text)
    text = p.many_blank_lines.sub("\n\n", text).strip()
    return "" if text.startswith("[Request interrupted by user") else text


def test_cleaning_with_guards_equals_cleaning_with_every_regex():
    rng = random.Random(23)
    pieces = ["word", " ", "\n", "\n\n\n", "\t", "Ab1+/" * 19 + "Ab1+", "Ab1+/" * 20, "=",
              "aaaa" * 30, "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==", "\u00e9\u3000",
              "<bash-input>ls</bash-input>", "<command-name>x</command-name>"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert lines.clean_text(text) == regex_clean(text), repr(text)
