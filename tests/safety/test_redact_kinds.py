"""Redaction that generalizes (issues 25 and 26): the corpus by kind, its hold-out, the near
misses of every kind, and every provider rule on a bare value with its own marker."""

from __future__ import annotations

import pytest

from lore_plugin.safety.redact import redact
from lore_plugin.safety.secret_tokens import TOKEN_RULES
from tests.safety.secrets_corpus_holdout import HELD_OUT
from tests.safety.secrets_corpus_holdout2 import HELD_OUT_2, NEAR_MISSES_2
from tests.safety.secrets_corpus_kinds import CASES, NEAR_MISSES, leaks
from tests.secrets_corpus import PROVIDER_TOKENS

# The one tuning case no rule holds, kept visible rather than dropped: "the new one is X for
# the root account password" names the password only after the value, far from it.
KNOWN_MISSES = {"I reset it; the new one is N3wRoot!Pw for the root account password"}


def test_the_corpus_by_kind_has_150_cases_and_a_fifth_held_out() -> None:
    total = len(CASES) + len(HELD_OUT)
    assert total >= 150
    assert len(HELD_OUT) == total // 5
    assert {kind for kind, _, _ in CASES} == {kind for kind, _, _ in HELD_OUT}
    assert {kind for kind, _ in NEAR_MISSES} == {kind for kind, _, _ in CASES}


@pytest.mark.parametrize(
    ("kind", "text", "values"),
    [pytest.param(*case, marks=pytest.mark.xfail(strict=True)) if case[1] in KNOWN_MISSES
     else case for case in CASES],
    ids=[f"{kind}-{i}" for i, (kind, _, _) in enumerate(CASES)],
)
def test_every_tuning_case_is_redacted(kind: str, text: str, values: tuple[str, ...]) -> None:
    redacted = redact(text)

    assert leaks(text, values, redacted) == [], redacted
    assert "[REDACTED:" in redacted


def test_the_held_out_cases_are_redacted_as_the_readme_says() -> None:
    """Rules were never tuned on these. The README reports this figure: 31 of 33 (94 %)."""
    held = sum(not leaks(text, values, redact(text)) for _, text, values in HELD_OUT)

    assert held >= 31, f"{held} of {len(HELD_OUT)}"


def test_a_second_hold_out_by_another_author_is_redacted_as_the_readme_says() -> None:
    """40 cases and 20 near misses written by someone who had not read the rules, measured
    once (39 of 40; the miss is a JDBC password holding both kinds of quote) and never tuned on."""
    held = sum(not leaks(text, values, redact(text)) for _, text, values in HELD_OUT_2)

    assert len(HELD_OUT_2) == 40 and held >= 39, f"{held} of {len(HELD_OUT_2)}"
    assert [text for _, text in NEAR_MISSES_2 if redact(text) != text] == []


@pytest.mark.parametrize(
    ("kind", "text"), NEAR_MISSES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(NEAR_MISSES)]
)
def test_every_near_miss_of_every_kind_survives_untouched(kind: str, text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("kind", "token", "secret"),
    PROVIDER_TOKENS,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PROVIDER_TOKENS)],
)
def test_every_provider_token_bare_in_neutral_prose_gets_its_own_marker(
    kind: str, token: str, secret: str
) -> None:
    redacted = redact(f"It came back as {token} after the deploy.")

    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted, redacted


@pytest.mark.parametrize("index", range(len(TOKEN_RULES)), ids=[rule.kind for rule in TOKEN_RULES])
def test_every_provider_rule_is_the_one_that_redacts_some_bare_token(index: int) -> None:
    rule = TOKEN_RULES[index]

    assert any(
        kind == rule.kind and (match := rule.pattern.search(token)) is not None
        and (rule.accept is None or rule.accept(match)) and secret in match.group(0)
        for kind, token, secret in PROVIDER_TOKENS
    )
