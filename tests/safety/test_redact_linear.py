"""Redaction runs in linear time: every regular expression the safety modules apply to text,
found by walking the modules rather than listed by hand, and redact() as a whole.

redact() runs on every write, on text anyone can type. A pattern that rescans a run from every
position in it is quadratic: 16K characters of `token_token_...` once took 1.4 s, and 200K
characters of `<private ` took 1.5 s (1M took 50 s, holding an import's write lock). The inputs
repeat each pattern's own literal text and hints with the separators that made patterns
backtrack, and the tests time them at 10K and 40K characters: 4x the input must cost well under
16x the time. The clock is the process's CPU time: on a loaded machine a run longer than a
scheduler time slice waits for the CPU, and wall-clock time made linear patterns look 10x slower.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
from collections.abc import Callable
from pathlib import Path
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

import pytest

import lore_plugin.safety as safety
from lore_plugin.safety.redact import RULES, redact
from lore_plugin.safety.secret_tokens import Rule
from tests.secrets_corpus import SECRETS

SMALL, LARGE = 10_000, 40_000
SEPARATORS = ["", "_", "a-", "=", ": ", " ", "@", "\n  ", "a:"]


# --- finding every pattern -------------------------------------------------------------------

MODULES = [importlib.import_module(f"{safety.__name__}.{info.name}")
           for info in pkgutil.iter_modules(safety.__path__)]


class Found:
    """A compiled pattern found in a safety module, with its rule's hints and check if any."""

    def __init__(self, where: str, pattern: re.Pattern[str], hints: tuple[str, ...] = (),
                 accept: Callable[[re.Match[str]], bool] | None = None) -> None:
        self.where, self.pattern, self.hints, self.accept = where, pattern, hints, accept


def _collect(where: str, value: Any, found: dict[int, Found]) -> None:
    if isinstance(value, re.Pattern):
        found.setdefault(id(value), Found(where, value))
    elif isinstance(value, Rule):
        found[id(value.pattern)] = Found(f"{where}:{value.kind}", value.pattern, value.hints, value.accept)
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            _collect(where, item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(where, item, found)


def every_pattern() -> list[Found]:
    found: dict[int, Found] = {}
    for module in MODULES:  # rules first, so a pattern keeps its rule's hints and check
        for name, value in vars(module).items():
            if not isinstance(value, re.Pattern):
                _collect(f"{module.__name__.rsplit('.', 1)[1]}.{name}", value, found)
    for module in MODULES:
        for name, value in vars(module).items():
            _collect(f"{module.__name__.rsplit('.', 1)[1]}.{name}", value, found)
    return list(found.values())


PATTERNS = every_pattern()


def test_every_pattern_is_compiled_where_the_walk_finds_it() -> None:
    """A pattern written inline (`re.findall(r"...", text)`) would escape the timing below."""
    inline = []
    for module in MODULES:
        path = Path(module.__file__ or "")
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr != "compile"):
                inline.append(f"{path.name}:{node.lineno} re.{node.func.attr}")

    assert inline == []
    # the walk found the rule table and the loose patterns, <private> sections' among them
    assert {id(rule.pattern) for rule in RULES} < {id(found.pattern) for found in PATTERNS}


def _literal_runs(pattern: re.Pattern[str]) -> list[str]:
    """The pattern's own fixed text (`<private`, `password`, `://`): what an attacker repeats."""
    runs: list[str] = []

    def walk(items: Any) -> None:
        current: list[str] = []
        for op, arg in items:
            if op is sre.LITERAL:
                current.append(chr(arg))
                continue
            if len(current) >= 2:
                runs.append("".join(current))
            current = []
            if op is sre.SUBPATTERN:
                walk(arg[-1])
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
                walk(arg[2])
            elif op is sre.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                walk(arg[1])
            elif op is sre.ATOMIC_GROUP:
                walk(arg)
        if len(current) >= 2:
            runs.append("".join(current))

    walk(_parser.parse(pattern.pattern, pattern.flags))
    return runs


def _adversarial_units(found: Found) -> list[str]:
    bases: list[str] = []
    for base in [*found.hints[:2], *_literal_runs(found.pattern)[:2], "a"]:
        if base and base not in bases:
            bases.append(base)
    bases = bases[:4] + [bases[0].upper()]
    return list(dict.fromkeys(base + sep for base in bases for sep in SEPARATORS))


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _best_of(runs: int, work: Callable[[str], object], text: str) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        work(text)
        best = min(best, time.process_time() - started)
    return best


def _grows_linearly(work: Callable[[str], object], unit: str, bound: float) -> tuple[bool, float, float]:
    """Time `work` on the unit repeated to SMALL and LARGE characters; retry once when noisy."""
    small = large = 0.0
    for runs in (2, 5):
        small = _best_of(runs, work, _repeat(unit, SMALL))
        large = _best_of(runs, work, _repeat(unit, LARGE))
        if large <= 8 * small + 0.005 and large < bound:
            return True, small, large
        if large >= bound:  # plainly slow: a retry would only make a failing run longer
            break
    return False, small, large


@pytest.mark.parametrize("found", PATTERNS, ids=[f"{i}-{found.where}" for i, found in enumerate(PATTERNS)])
def test_every_pattern_in_the_safety_modules_runs_in_linear_time(found: Found) -> None:
    def scan(text: str) -> None:
        for match in found.pattern.finditer(text):
            if found.accept is not None:
                found.accept(match)

    slow = []
    for unit in _adversarial_units(found):
        linear, small, large = _grows_linearly(scan, unit, bound=0.5)
        if not linear:
            slow.append(f"{unit!r}: {small * 1000:.1f} ms at {SMALL}, {large * 1000:.1f} ms at {LARGE}")
            break  # one is enough to fail, and each costs seconds

    assert not slow, f"{found.where} / {found.pattern.pattern[:60]}: " + "; ".join(slow)


def test_the_private_section_pattern_is_among_those_timed() -> None:
    assert any("<private" in _literal_runs(found.pattern) for found in PATTERNS)


MIXED_UNITS = [
    "token_", "token=", "key-", "a-", "a://", "://a:", "a@", "=", ":", "'", '\\"', "a=", "a='",
    "eyJa.", "-u ", "--password ", "password is ", "-----BEGIN ", "<private>", "<private ",
    "x:y@", "&a=", "mysql -p", "sshpass -f x ", "<password>", "password: |\n  ", "AKIA", "sk-",
    "Bearer ",
]


def test_redact_as_a_whole_runs_in_linear_time_on_adversarial_input() -> None:
    lines = [line for _, line in SECRETS]
    units = MIXED_UNITS + [a + b for a in MIXED_UNITS[:8] for b in MIXED_UNITS[:8] if a != b]
    units += ["".join(lines[i : i + 20]) for i in range(0, len(lines), 20)]
    slow = []
    for unit in units:
        linear, small, large = _grows_linearly(redact, unit, bound=2.0)
        if not linear:
            slow.append(f"{unit[:40]!r}: {small * 1000:.1f} ms, {large * 1000:.1f} ms")

    assert not slow, "; ".join(slow)


def test_200k_characters_of_an_unclosed_private_tag_take_well_under_a_second() -> None:
    text = _repeat("<private ", 200_000)

    started = time.process_time()
    redact(text)

    assert time.process_time() - started < 0.5


# --- no redaction under the write lock ------------------------------------------------------
# A 1M-character import row once held the database's write lock for 48 s while it was
# redacted, and a `lore remember` meanwhile failed with "database is locked". Every write
# redacts its text before its transaction opens; a value redact() already returned
# (safety.redact.Redacted) passes the store's own last check at no cost.


def test_no_redaction_runs_while_a_write_transaction_is_open(tmp_path, monkeypatch) -> None:
    import lore_plugin.safety.redact as redaction
    from lore_plugin.core.types import NewFragment
    from lore_plugin.store import Store

    source, store = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    secret = "DB_PASSWORD=" + "L0reFakeLockPw" * 3
    fid = source.insert(NewFragment(content=secret, summary="lock test", depth=0), 1.0)
    rows = [{**row, "content": secret} for row in source.export_fragments()]
    under_lock: list[bool] = []
    real = redaction._redact_once

    def watched(text: str) -> str:
        under_lock.append(store.conn.in_transaction)
        return real(text)

    monkeypatch.setattr(redaction, "_redact_once", watched)
    store.import_rows(rows, [], [])
    store.add_failure_records([(None, None, "KeyError", "key error", secret, secret, None, 1.0)])
    store.insert(NewFragment(content=secret, summary="again", depth=0), 2.0)
    store.update_text(fid, summary="edited", content=secret)
    ready = NewFragment(content=redaction.redact(secret), summary=redaction.redact("x"), depth=0)
    with store.write():  # a caller's own transaction: it hands the store redacted text
        store.insert(ready, 3.0)

    assert under_lock and not any(under_lock)
    stored = [row["content"] for row in store.export_fragments()]
    assert len(stored) == 3 and not [text for text in stored if "L0reFakeLockPw" in text]
