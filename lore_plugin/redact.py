"""Secret scrubbing: every text passes through redact() before an LLM or the database sees it.

Rules run in a fixed order, most specific first: a provider token is named precisely
(`[REDACTED:github-token]`) before the generic `password = ...` rule looks at what is left, and
that rule leaves already-redacted values alone. Text inside <private>...</private> goes first of
all and becomes `[PRIVATE]`.

The aim is high recall on real secrets without shredding prose and code: plain words, code
identifiers, type annotations, uuids, git SHAs and paths survive. Stdlib only, regexes compiled
once at import.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

PRIVATE_MARKER = "[PRIVATE]"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class _Rule:
    """One secret shape. Groups named `pre` and `post` are kept; the rest of a match goes.

    `accept`, when given, sees the candidate secret and may refuse it (a heuristic that keeps
    ordinary code and prose intact).
    """

    kind: str
    hints: tuple[str, ...]  # lower-case substrings; the rule only runs if the text has one
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None


def _mixed(value: str) -> bool:
    """Random tokens mix digits, upper and lower case; words and hex hashes do not."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


# --- generic "name = value" assignments ------------------------------------------------------

# Words that make a key name a secret's name. A word must be the whole key, or be joined to the
# rest of the key by _ . or - (or camelCase before it), so `tokenizer` and `max_tokens` are not
# secrets but `DB_PASSWORD`, `apiKey`, `client-secret` and `_authToken` are.
_SECRET_WORDS = (
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|account[_-]?key|private[_-]?key|secret[_-]?key|signing[_-]?key|encryption[_-]?key"
    r"|master[_-]?key|auth[_-]?token|credentials?|client[_-]?secret)"
)
_ASSIGNMENT = re.compile(
    r"(?P<pre>(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]*?"
    + _SECRET_WORDS
    + r"(?:[_.\-][A-Za-z0-9_.\-]*)?)\\?[\"']?\s*(?P<sep>:=|=>|=|:)\s*)"
    # A quoted value may sit inside a JSON string, its quotes escaped (\"): `esc` is then "\".
    r"(?:(?P<esc>\\?)(?P<q>[\"'])(?P<quoted>(?:(?!(?P=esc)(?P=q))[^\n])*)(?P=esc)(?P=q)"
    r"|(?P<bare>[^\s\"'`,;)}\]\\]+))",
    re.IGNORECASE,
)
_LOWER_IDENTIFIER = re.compile(r"[a-z_]+(?:\.[a-z_]+)*")  # token, self.password, none
_IDENTIFIER = re.compile(r"[A-Za-z_]+")  # SecretStr, Optional: type names and words
_ATTRIBUTE = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")  # settings.API_KEY
_NOT_SECRET_WORDS = frozenset({"true", "false", "none", "null", "nil", "undefined", "required"})
# Values that name or template a secret rather than hold it: $VAR, ${VAR}, {{ var }}, <your-key>,
# %(pw)s, paths, masks, and values an earlier rule already replaced.
_REFERENCE_START = ("$", "{", "<", "%", "/", "~", "./", "*", "[REDACTED", PRIVATE_MARKER, "[")


def _assignment_is_secret(match: re.Match[str]) -> bool:
    quoted = match.group("quoted")
    if quoted is not None:
        value = quoted.strip()
        return bool(value) and not value.startswith(_REFERENCE_START) and set(value) != {"x"}
    value = match.group("bare")
    if value.startswith(_REFERENCE_START) or value.lower() in _NOT_SECRET_WORDS:
        return False
    if "://" in value:  # password_reset_url: https://...; credentials in URLs have their own rule
        return False
    if value.isdigit() and len(value) < 12:  # token_ttl: 3600, max_token_length = 512
        return False
    key = match.group("key")
    if key.isupper() and match.group("pre") == key + "=":
        return True  # env file style, DB_PASSWORD=hunter: the value is always a literal
    if "(" in value or "[" in value:  # token = make_token(), pw = os.environ["PW"]
        return False
    if _ATTRIBUTE.fullmatch(value):  # api_key=settings.API_KEY
        return False
    if match.group("sep") == ":" and _IDENTIFIER.fullmatch(value):
        return False  # password: str, "the token: expired" (annotations and prose)
    return len(value) >= 3 and not _LOWER_IDENTIFIER.fullmatch(value)


def _cli_value_is_secret(match: re.Match[str]) -> bool:
    value = match.group("secret")
    return not value.startswith(_REFERENCE_START) and not value.isdigit()  # docker -u 1000:1000


_HEX = re.compile(r"[0-9a-fA-F]+")


def _keyword_blob_is_secret(match: re.Match[str]) -> bool:
    value = match.group("secret").rstrip("=")
    if _HEX.fullmatch(value):
        # After "key", 40 hex digits are far more often a git SHA ("the key commit ...") than a
        # key; after "secret", "token" or "password" they are the old GitHub token shape.
        return match.group("word").lower() != "key" or len(value) != 40
    return _mixed(value)


_I = re.IGNORECASE
_S = re.DOTALL


def _rule(
    kind: str,
    hints: str,
    pattern: str,
    flags: int = 0,
    accept: Callable[[re.Match[str]], bool] | None = None,
) -> _Rule:
    return _Rule(kind, tuple(hints.split()), re.compile(pattern, flags), accept)


_AWS_PREFIXES = "AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA"

_RULES: tuple[_Rule, ...] = (
    # Multi-line blocks first, so later rules never see half a key.
    _rule(
        "private-key",
        "private",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        _S,
    ),
    # scheme://user:password@host keeps scheme, user and host: they say what was connected to.
    # The scheme is anchored and bounded, or a long run like "a-a-a-..." is rescanned from every
    # position (quadratic).
    _rule(
        "password",
        "://",
        r"(?P<pre>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s:/@'\"<>\[\]]*:)"
        r"[^\s@'\"<>/]+(?P<post>@)",
    ),
    _rule(
        "slack-webhook",
        "hooks.slack.com",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
    ),
    _rule("anthropic-key", "sk-ant-", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    # OpenAI: a digit is required so that hyphenated words like sk-learn-... survive.
    _rule(
        "openai-key",
        "sk-",
        r"(?<![A-Za-z0-9_\-])sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}",
    ),
    _rule(
        "stripe-key",
        "_live_ _test_",
        r"(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    _rule("stripe-webhook-secret", "whsec_", r"\bwhsec_[A-Za-z0-9]{24,}"),
    _rule(
        "aws-key",
        _AWS_PREFIXES.lower().replace("|", " "),
        rf"(?<![A-Z0-9])(?:{_AWS_PREFIXES})[A-Z0-9]{{16}}(?![A-Z0-9])",
    ),
    _rule(
        "aws-secret",
        "aws",
        r"(?P<pre>aws_?secret_?(?:access_?)?key\\?[\"']?\s*(?::=|=>|=|:)\s*\\?[\"']?)"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        _I,
    ),
    _rule(
        "github-token", "ghp_ gho_ ghu_ ghs_ ghr_", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"
    ),
    _rule("github-token", "github_pat_", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    _rule("gitlab-token", "glpat-", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    _rule("slack-token", "xox", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    _rule("slack-token", "xapp-", r"\bxapp-\d-[A-Za-z0-9\-]{10,}"),
    _rule("google-api-key", "aiza", r"\bAIza[0-9A-Za-z_\-]{35}"),
    _rule("npm-token", "npm_", r"\bnpm_[A-Za-z0-9]{36}"),
    _rule("pypi-token", "pypi-", r"\bpypi-[A-Za-z0-9_\-]{50,}"),
    _rule("huggingface-token", "hf_", r"\bhf_[A-Za-z0-9]{30,}"),
    _rule("sendgrid-key", "sg.", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    _rule("digitalocean-token", "_v1_", r"\bdo[por]_v1_[a-f0-9]{64}"),
    _rule("telegram-bot-token", ":aa", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),
    _rule("jwt", "eyj", r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    # Authorization headers: whatever the scheme, the credential after it goes.
    _rule(
        "bearer-token",
        "authorization",
        r"(?P<pre>\b(?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?:(?:bearer|basic|token|digest)\s+)?)[A-Za-z0-9._~+/\-]{8,}=*",
        _I,
    ),
    _rule("bearer-token", "bearer", r"(?P<pre>\bbearer\s+)[A-Za-z0-9._~+/\-]{16,}=*", _I),
    # curl -u user:pass, .netrc lines, --password VALUE flags.
    _rule(
        "password", "-u", r"(?P<pre>(?<!\S)-u\s+[^\s:]+:)(?P<secret>\S+)", 0, _cli_value_is_secret
    ),
    _rule(
        "password",
        "machine",
        r"(?P<pre>\bmachine\s+\S+\s+login\s+\S+\s+password\s+)(?P<secret>\S+)",
        _I,
    ),
    _rule(
        "secret",
        "--",
        r"(?P<pre>(?<!\S)--(?:password|passwd|token|api-key|secret|client-secret)\s+)"
        r"(?P<secret>[^\s\"']+)",
        _I,
        _cli_value_is_secret,
    ),
    _Rule(
        "secret",
        ("pass", "pwd", "secret", "token", "key", "credential"),
        _ASSIGNMENT,
        _assignment_is_secret,
    ),
    # A long random-looking blob shortly after a word like "key" or "secret".
    _rule(
        "secret",
        "key secret token password",
        r"(?P<pre>\b(?P<word>key|secret|token|password)\b[^\n]{0,24}?)"
        r"(?P<secret>(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{32,}={0,2})",
        _I,
        _keyword_blob_is_secret,
    ),
)

_PRIVATE = re.compile(r"<private\b[^>]*>.*?(?:</private\s*>|\Z)", _I | _S)


def _replacer(rule: _Rule) -> Callable[[re.Match[str]], str]:
    names = rule.pattern.groupindex
    wrap_quoted = "quoted" in names  # keep the quotes around a redacted string literal

    def replace(match: re.Match[str]) -> str:
        if rule.accept is not None and not rule.accept(match):
            return match.group(0)
        pre = match.group("pre") if "pre" in names else ""
        post = match.group("post") if "post" in names else ""
        if wrap_quoted and match.group("quoted") is not None:
            quote = match.group("esc") + match.group("q")
            return f"{pre}{quote}{marker(rule.kind)}{quote}"
        return f"{pre}{marker(rule.kind)}{post}"

    return replace


_COMPILED: tuple[tuple[tuple[str, ...], re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    tuple((rule.hints, rule.pattern, _replacer(rule)) for rule in _RULES)
)


def redact(text: str) -> str:
    """Replace secrets with `[REDACTED:<kind>]` and <private> sections with `[PRIVATE]`."""
    if not text:
        return text
    if "<" in text:
        text = _PRIVATE.sub(PRIVATE_MARKER, text)
    # Most text holds no secret at all. A substring test is ~100x cheaper than a regex scan, so
    # a rule runs only when the text contains one of its hints. Folding once up front is safe:
    # replacements insert only markers, and no rule needs to see a marker.
    folded = text.lower()
    for hints, pattern, replace in _COMPILED:
        if any(hint in folded for hint in hints):
            text = pattern.sub(replace, text)
    return text
