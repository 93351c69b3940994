"""`json.loads` without importing json, for the Stop hook.

The Stop hook parses its payload and a few transcript lines after every turn. `import json`
costs it about 8 ms of CPU, as much as a bare interpreter's start: json.decoder imports re,
and re imports enum. CPython's C scanner (the `_json` module that json.loads itself uses)
parses without either. Whatever that scanner does not accept as it stands (not UTF-8, a BOM,
malformed or too deep) goes to json.loads, so every answer and every error is json.loads's:
only the time differs."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"  # JSON's four, as json.decoder.WHITESPACE
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Options:
    """json.loads's defaults, in the attributes the C scanner reads from its decoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _make_scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    try:
        from _json import make_scanner
    except ImportError:  # another Python than CPython: json.loads every time
        return None
    return make_scanner(_Options())  # type: ignore[arg-type]  # reads just these attributes


_scan = _make_scanner()


def _skip_whitespace(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def loads(data: bytes | str) -> Any:
    """The value of one JSON document, exactly as json.loads(data) returns it."""
    if _scan is not None:
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            value, end = _scan(text, _skip_whitespace(text, 0))
            if _skip_whitespace(text, end) == len(text):
                return value
        except Exception:  # noqa: BLE001 - json.loads below gives the answer or the error
            pass
    import json

    return json.loads(data)
