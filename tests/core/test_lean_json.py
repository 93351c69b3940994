"""lean_json.loads answers exactly as json.loads does, values and errors alike."""

from __future__ import annotations

import json
import math

import pytest

from lore_plugin.core import lean_json

DOCUMENTS = [
    b'{"session_id": "abc", "transcript_path": "/x/y.jsonl", "stop_hook_active": false}',
    b'  \n{"a": [1, 2.5, -3e10, true, null, "\\u00e9\\n\\"q\\""]}\r\n\t',
    '{"prompt": "caf\u00e9 \U0001f600", "n": 12345678901234567890}'.encode(),
    b'[]', b'"just a string"', b'42', b'-0.0', b'{"x": NaN, "y": -Infinity, "z": Infinity}',
    b'{"dup": 1, "dup": 2}', '{"str input": 1}',
]
BROKEN = [
    b'', b'   ', b'{', b'{"a": 1} trailing', b'{"a": 1}{"b": 2}', b"{'single': 1}",
    b'{"a": 1,}', b'\xff\xfe{}', b'{"bad utf8": "\xc3\x28"}', b'{"ctrl": "a\x01b"}', b'nul',
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_valid_document_gives_json_loads_value(document):
    got, want = lean_json.loads(document), json.loads(document)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert type(got) is type(want)


def test_nan_stays_nan_and_big_integers_stay_exact():
    got = lean_json.loads(b'{"x": NaN, "n": 123456789012345678901234567890}')
    assert math.isnan(got["x"]) and got["n"] == 123456789012345678901234567890


@pytest.mark.parametrize("document", BROKEN)
def test_a_broken_document_raises_json_loads_error(document):
    with pytest.raises(ValueError) as want:
        json.loads(document)
    with pytest.raises(ValueError) as got:
        lean_json.loads(document)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


def test_other_encodings_json_loads_accepts_are_accepted_too():
    assert lean_json.loads('{"a": "\u00e9"}'.encode("utf-16")) == {"a": "\u00e9"}
    assert lean_json.loads(b'\xef\xbb\xbf{"bom": 1}') == {"bom": 1}


def test_too_deep_nesting_is_json_loads_recursion_error():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        lean_json.loads(deep)


def test_it_parses_with_the_c_scanner_here():
    """On CPython the fast path is taken; were it not, every call would import json."""
    assert lean_json._scan is not None
    assert lean_json._scan('{"a": 1}', 0) == ({"a": 1}, 8)
