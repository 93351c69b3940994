"""The subject a heading made by placement is named after (recall/heading_names.py): read from
the fact's summary by its shape, never a copy of the fact."""

from __future__ import annotations

import pytest

from lore_plugin.recall.heading_names import MAX_WORDS, subject_name


@pytest.mark.parametrize("summary, subject", [
    # A short lead before a colon is the subject.
    ("Canary deploys: a new build takes 5% of traffic for an hour.", "Canary deploys"),
    ("Exit survey: 41% of cancellations cite price.", "Exit survey"),
    # The leading noun phrase, up to its verb: after a plural, after an -s verb with an object.
    ("Trials last 14 days with full features.", "Trials"),
    ("Annual plans get two months free.", "Annual plans"),
    ("A lock file pins every package to an exact hash.", "Lock file"),
    ("Pull requests are squash-merged.", "Pull requests"),
    ("Deploys are frozen from Friday 15:00 until Monday morning UTC.", "Deploys"),
    ("Tree-shaking and lazy routes cut the JavaScript payload from 1.8 MB to 600 KB.",
     "Tree-shaking (JavaScript)"),
    ("False alarms from the disk alert were cut.", "False alarms"),
    # After a singular determiner the -s word is the verb; an adverb ends the phrase or
    # follows the verb; an -s word before a plural is a verb before its object.
    ("Every pod declares requests and a ceiling.", "Pod"),
    ("Hack week happens twice a year.", "Hack week"),
    ("Checking significance daily inflates type I error.", "Checking significance"),
    ("The book club meets monthly.", "Book club"),
    ("Stripe handles invoices and dunning.", "Stripe"),
    ("Missing sensor readings are imputed.", "Missing sensor readings"),
    ("Product analytics events are defined in a tracking plan.", "Product analytics"),
    ("Built Python MCP server using FastMCP.", "Python MCP server (FastMCP)"),
    # Notes that open with what was done are about its object.
    ("Deployed new Spark job for materialization pipeline.", "New Spark job"),
    ("Set up GitHub Pages for personal-docs.", "GitHub Pages (personal-docs)"),
    ("Coordinated with David Kim on Slack about the old API.", "David Kim (Slack, API)"),
    # A name written in lower case keeps its spelling; names beyond the subject follow it,
    # but not days, units or words that describe ("squash-merged").
    ("mypy runs with ignore_missing_imports.", "mypy runs (ignore_missing_imports)"),
    # What redaction left names nothing: no heading "Key (REDACTED)" or "(PRIVATE)".
    ("The key [REDACTED:aws-access-key] was rotated on Monday.", "Key"),
    ("Notes [PRIVATE] on the offsite with Sarah Chen.", "Notes (Sarah Chen)"),
    ("[REDACTED:password]", "Notes"),
    # A possessive is no plural: the phrase goes on to its noun.
    ("User's shell is fish.", "User's shell"),
    ("Sam\u2019s editor is Neovim.", "Sam\u2019s editor (Neovim)"),
    # A date before a colon dates the note; its subject comes after.
    ("2026-09-14: DB upgraded from Postgres 13 to 16", "DB (Postgres)"),
    ("2026-10-01: fixed N+1 on the invoice list", "N+1"),
])
def test_the_subject_is_read_from_the_summarys_shape(summary, subject):
    assert subject_name(summary) == subject


@pytest.mark.parametrize("summary", [
    "", "   ", "???", "42", "The", "The quick brown fox jumps over the lazy dog " * 20,
    "Our team: " + "x" * 500, "a:b:c", ": leading colon", "((()))", "ünïcödé wörds everywhere",
])
def test_any_summary_gets_a_short_non_empty_name(summary):
    name = subject_name(summary)
    assert name.strip() and len(name.split()) <= MAX_WORDS and len(name) <= 300


@pytest.mark.parametrize("summary, subject", [
    # The project's name is a name, whatever its ending: not a plural that closes the phrase.
    ("Atlas local dev: make dev, API on port 8040", "Atlas local dev (API)"),
    ("Atlas tests need ATLAS_INTEGRATION=1", "Atlas tests (ATLAS_INTEGRATION=1)"),
    # Words that are not the project's keep their reading.
    ("Trials last 14 days with full features.", "Trials"),
])
def test_the_projects_name_is_read_as_a_name(summary, subject):
    assert subject_name(summary, frozenset({"atlas"})) == subject
