"""Secret scrubbing: every text passes through redact() before an LLM or the database sees it.

Rules run in a fixed order, most specific first: <private>...</private> sections become
`[PRIVATE]`; multi-line blocks (PEM and PuTTY keys, YAML `password: |`) go whole; then URLs with
credentials, then provider tokens named by their prefix (secret_tokens.py), then secrets known by
their context: headers, command-line flags, `name = value` assignments, "the password is ...".
Each becomes `[REDACTED:<kind>]`. A later rule never touches text an earlier one replaced, so
redact(redact(x)) == redact(x).

The aim is high recall on real secrets without shredding prose and code: plain words, code
identifiers, type annotations, uuids, git SHAs and paths survive (secret_context.py judges
names and values).

Cost: redact() runs on every write. A rule runs only when the text holds one of its hint
substrings, and every pattern is linear in the length of the text: anchored starts, possessive
runs (Python 3.11+), bounded look-backs. tests/safety/test_redact.py times them on adversarial input.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .secret_context import (
    MARKER_START,
    PRIVATE_MARKER,
    assignment_is_secret,
    cli_value_is_secret,
    env_line_is_secret,
    htpasswd_sets_password,
    keyword_blob_is_secret,
    literal_under_name_is_secret,
    named_block_is_secret,
    prose_value_is_secret,
    url_password_is_secret,
)
from .secret_phrases import PHRASE_RULES
from .secret_tokens import TOKEN_RULES, Rule, rule

__all__ = ["PRIVATE_MARKER", "Redacted", "marker", "redact"]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_I = re.IGNORECASE
_S = re.DOTALL
_M = re.MULTILINE


# --- context rules ---------------------------------------------------------------------------

# A value ends where the next `name=` or `name:` begins, so `token_type=bearer&access_token=XYZ`
# is two assignments, and `:` ends it before a space too (YAML's `key: value`). Nor does a value
# start with `name =` or `name: `: in `safe: TOKEN="..."` the assignment is the second one
# (base64 padding, `Zm9v==`, is not a `name=`).
_BARE = (
    r"(?![A-Za-z_][A-Za-z0-9_.\-]*+(?:[ \t]++=|=(?!=*+(?:[\s&;,)}\]]|\Z))|:\s))"
    r"(?:[^\s\"'`,;)}\]\\=&:]|[=&:](?![A-Za-z_][A-Za-z0-9_.\-]*+[=:]|\s|\Z))++"
)
# Quoted values may sit in a JSON string, their quotes escaped (\"): `esc` is then "\". Inside,
# a backslash pair is one character, so `"a = \"b\" c"` is one literal, not three.
_QUOTED = (
    r"(?P<esc>\\?)(?P<q>[\"'])"
    r"(?P<quoted>(?:(?!(?P=esc)(?P=q))(?:\\[^\n]|[^\\\n]))*+)(?P=esc)(?P=q)"
)
# Only the first character of a run of name characters may start a match, and the run is read
# once (possessive). secret_context.py then judges the name. (A lookahead that looked for a
# secret word inside the run was linear in theory but measured superlinear in CPython's engine.)
_KEY = r"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]++)"
_SECRET_HINTS = "pass pw secret token key auth cred sess sid dsn pat psk salt"
_QUOTED_ARG = r"[^\s'\"\-]\S*+|'[^'\n]*+'|\"[^\"\n]*+\""  # -pSECRET, -p'SECRET', -p "SECRET"
_COMMAND_TAIL = r"[^\n|;&]{0,200}?(?<!\S)"  # the rest of one command, bounded

# One line of text inside a JSON string: up to an escaped line break or the closing quote.
_JSON_LINE = r"(?:[^\n\\\"]|\\[^n\n])++"

_CONTEXT_BEFORE: tuple[Rule, ...] = (
    # Multi-line blocks first, so later rules never see half a key. An unclosed block goes to
    # the end of the text (the first start then consumes it all: linear).
    rule(
        "private-key",
        "private",
        r"-----BEGIN (?:[A-Z0-9]++ ){0,4}?PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END (?:[A-Z0-9]++ ){0,4}?PRIVATE KEY(?: BLOCK)?-----|\Z)",
        _S,
    ),
    rule(
        "private-key",
        "putty-user-key-file-",
        r"PuTTY-User-Key-File-\d++:.*?(?:Private-(?:MAC|Hash):[ \t]*+[0-9a-fA-F]++|\Z)",
        _S,
    ),
    # YAML block scalars under a secret's name: every deeper-indented line after `password: |`.
    rule(
        "secret",
        _SECRET_HINTS,
        r"^(?P<pre>(?P<indent>[ \t]*+)(?:-[ \t]++)?[\"']?(?P<key>[A-Za-z0-9_.\-]++)[\"']?"
        r"[ \t]*+:[ \t]*+[|>][+\-]?[1-9]?[ \t]*+(?:#[^\n]*+)?\n)"
        r"(?P<secret>(?P=indent)[ \t]++[^\n]++(?:\n(?P=indent)[ \t]++[^\n]++)*+)",
        _M,
        named_block_is_secret,
    ),
    # The same block inside a JSON string, its line breaks written \n and its end a bare quote.
    rule(
        "secret",
        "|\\n >\\n",
        r"(?<=\\n)(?P<pre>(?P<indent>[ \t]*+)(?:-[ \t]++)?(?P<key>[A-Za-z0-9_.\-]++)"
        r"[ \t]*+:[ \t]*+[|>][+\-]?[1-9]?[ \t]*+\\n)"
        r"(?P<secret>(?P=indent)[ \t]++" + _JSON_LINE + r"(?:\\n(?P=indent)[ \t]++" + _JSON_LINE + r")*+)",
        0,
        named_block_is_secret,
    ),
    # Sentry DSNs carry a key (and once a secret) as the URL's user: https://<key>@o1.ingest...
    rule(
        "sentry-dsn",
        "://",
        r"(?P<pre>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,20}+://)"
        r"[0-9a-f]{32}(?::[0-9a-f]{32})?(?P<post>@)",
    ),
    # scheme://user:password@host keeps scheme, user and host: they say what was connected to.
    # The password runs to the last @ before the host, so p@ss@word and ab/cd1234 go whole. The
    # scheme is anchored and bounded, and the password lazy and bounded, so a long run such as
    # "a://a://..." is not rescanned from every position.
    rule(
        "password",
        "://",
        r"(?P<pre>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,20}+://"
        r"(?P<user>[^\s:/@'\"<>\[\]]{0,256}+):)"
        r"(?P<secret>[^\s<>]{1,256}?)"
        r"(?P<post>@)(?=[A-Za-z0-9\[][A-Za-z0-9.\-\[\]:%_]*+(?:[/?#\s'\"<>,;()}\]]|\Z))",
        0,
        url_password_is_secret,
    ),
    # jdbc:oracle:thin:scott/tiger@host:1521:orcl
    rule("password", "jdbc:oracle:", r"(?P<pre>jdbc:oracle:\w++:[^\s/@:]++/)[^\s@]++(?P<post>@)"),
    # Azure SAS tokens: the signature after ?sig= or &sig=. `sig=inspect.signature(f)` in code
    # has no ? or & before it, and no 20-character base64 run after.
    rule("azure-sas", "sig=", r"(?P<pre>[?&;]sig=)[A-Za-z0-9%+/_\-]{20,}+={0,2}"),
)

_CONTEXT_AFTER: tuple[Rule, ...] = (
    rule(
        "aws-secret",
        "aws",
        r"(?P<pre>aws_?secret_?(?:access_?)?key\\?[\"']?[ \t]*+(?::=|=>|=|:)[ \t]*+\\?[\"']?)"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        _I,
    ),
    # Authorization headers: whatever the scheme (Bearer, Basic, SSWS, ...), the credential goes.
    rule(
        "bearer-token",
        "authorization",
        r"(?P<pre>\b(?:proxy-)?authorization\\?[\"']?[ \t]*+[:=][ \t]*+\\?[\"']?"
        r"(?:[A-Za-z][A-Za-z0-9\-]{1,20}+[ \t]++)?)[A-Za-z0-9._~+/\-]{8,}+=*+",
        _I,
    ),
    rule("bearer-token", "bearer", r"(?P<pre>\bbearer\s++)[A-Za-z0-9._~+/\-]{16,}+=*+", _I),
    # Command lines: curl -u user:pass, mysql -pSECRET, sshpass -p, docker login -p, ...
    rule(
        "password",
        "-u --user",
        r"(?P<pre>(?<!\S)(?:-u|--user)(?:[ \t]++|=)[^\s:]++:)(?P<secret>\S++)",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "mysql mariadb",
        r"(?P<pre>\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b"
        + _COMMAND_TAIL
        + r"-p)(?P<secret>"
        + _QUOTED_ARG
        + ")",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "sshpass",
        r"(?P<pre>\bsshpass(?:[ \t]++-[^p\s]\S*+)*+[ \t]++-p[ \t]*+)(?P<secret>" + _QUOTED_ARG + ")",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "login upload",
        r"(?P<pre>\b(?:(?:docker|podman|buildah|nerdctl|skopeo|oras)[ \t]++login"
        r"|helm[ \t]++registry[ \t]++login|twine[ \t]++upload)\b"
        + _COMMAND_TAIL
        + r"(?:-p|--password)(?:[ \t]++|=))(?P<secret>"
        + _QUOTED_ARG
        + ")",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "redis-cli",
        r"(?P<pre>\bredis-cli\b" + _COMMAND_TAIL + r"-a[ \t]++)(?P<secret>" + _QUOTED_ARG + ")",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "sqlcmd bcp osql isql",
        r"(?P<pre>\b(?:sqlcmd|bcp|osql|isql)\b" + _COMMAND_TAIL + r"-P[ \t]*+)"
        r"(?P<secret>" + _QUOTED_ARG + ")",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "smbclient",
        r"(?P<pre>\bsmbclient\b" + _COMMAND_TAIL + r"(?:-U|--user)[ \t=]*+[^\s%]++%)"
        r"(?P<secret>\S++)",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "htpasswd",
        r"(?P<pre>\bhtpasswd[ \t]++(?P<opts>(?:-[A-Za-z]++[ \t]++)++)[^\s\-]\S*+[ \t]++\S++[ \t]++)"
        r"(?P<secret>\S++)",
        0,
        htpasswd_sets_password,
    ),
    # openssl -passin pass:SECRET (env:VAR and file:PATH name the secret instead).
    rule("password", "pass:", r"(?P<pre>(?<!\S)-pass(?:in|out)?[ \t]++pass:)(?P<secret>\S++)"),
    rule(
        "password",
        "requirepass masterauth",
        r"(?P<pre>(?:(?<![\w\-])|(?<=\\n))(?:requirepass|masterauth)[ \t]++)(?P<secret>\S++)",
        0,
        cli_value_is_secret,
    ),
    rule(
        "password",
        "machine",
        r"(?P<pre>\bmachine\s++\S++\s++login\s++\S++\s++password\s++)(?P<secret>\S++)",
        _I,
    ),
    rule(
        "secret",
        "--",
        r"(?P<pre>(?<!\S)--(?:password|passwd|pass|token|api-key|apikey|secret|client-secret"
        r"|access-token|auth-token|private-token)[ \t]++)(?P<secret>[^\s\"']++)",
        _I,
        cli_value_is_secret,
    ),
    # Env files: NAME=value to the end of the value, `=` and `&` included.
    rule(
        "secret",
        _SECRET_HINTS,
        r"^(?P<pre>[ \t]*+(?:export[ \t]++)?(?P<key>[A-Z][A-Z0-9_]*+)=)"
        r"(?:" + _QUOTED + r"|(?P<bare>[^\s\"'#]\S*+))",
        _M,
        env_line_is_secret,
    ),
    # <password>hunter2</password>
    rule(
        "secret",
        "</",
        r"(?P<pre><(?P<key>[A-Za-z_][A-Za-z0-9_.:\-]{0,80}+)>)(?P<secret>[^<\n]{1,500}+)"
        r"(?P<post></(?P=key)>)",
        0,
        literal_under_name_is_secret,
    ),
    # .NET config: <add key="DbPassword" value="hunter2" />
    rule(
        "secret",
        "value",
        r"(?P<pre>\bkey[ \t]*+=[ \t]*+(?P<kq>\\?[\"'])(?P<key>[^\"'\n\\]{1,80}+)(?P=kq)[ \t]++"
        r"value[ \t]*+=[ \t]*+(?P<q>\\?[\"']))(?P<secret>[^\"'\n\\]{1,500}+)(?P<post>(?P=q))",
        0,
        literal_under_name_is_secret,
    ),
    # name = value, name: value, "name": "value", name := value, name => value.
    rule(
        "secret",
        _SECRET_HINTS,
        r"(?P<pre>" + _KEY + r"\\?[\"']?[ \t]*+(?P<sep>:=|=>|=|:(?!//))[ \t]*+)"
        r"(?:" + _QUOTED + r"|(?P<bare>" + _BARE + "))",
        _I,
        assignment_is_secret,
    ),
    # Prose: "the password for prod is hunter2", "my pin is 4921".
    rule(
        "secret",
        "pass pw pin secret token key",
        r"(?P<pre>\b(?P<word>password|passphrase|passcode|passwd|pwd|pw|pin|secret|token"
        r"|api[ _-]?key|access[ _-]key|secret[ _-]key)s?"
        r"(?:[ \t]++(?:for|of|on|to|at|in|from)(?:[ \t]++[^\s]{1,40}+){1,3}?)?"
        r"[ \t]++(?:is now|is|was|will be|became)[ \t]++[\"'`]?)"
        r"(?P<secret>(?:[^\s\"'`.,;:!?)]|[.,;:!?)](?=[^\s\"'`]))++)",
        _I,
        prose_value_is_secret,
    ),
    # A long random-looking blob shortly after a word like "key" or "secret".
    rule(
        "secret",
        "key secret token password",
        r"(?P<pre>\b(?P<word>key|secret|token|password)\b[^\n]{0,24}?)"
        r"(?P<secret>(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{32,}+={0,2})",
        _I,
        keyword_blob_is_secret,
    ),
)

RULES: tuple[Rule, ...] = _CONTEXT_BEFORE + TOKEN_RULES + PHRASE_RULES + _CONTEXT_AFTER
"""Every rule, in the order redact() applies them (tests time each one)."""

# The opening tag's attributes stop at the next `<` as well as at `>`: `[^>]*+` read to the end
# of the text from every `<private` in a run of them with no `>`, which was quadratic (200K
# characters of `<private ` took 1.5 s, 1M took 50 s).
_PRIVATE = re.compile(r"<private\b[^<>]*+>.*?(?:</private\s*+>|\Z)", _I | _S)


def _replacer(item: Rule, rescan: bool = True) -> Callable[[re.Match[str]], str]:
    names = item.pattern.groupindex
    inner = _replacer(item, rescan=False) if rescan and "quoted" in names else None
    has_pre, has_post, has_quoted = "pre" in names, "post" in names, "quoted" in names

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        pre = match.group("pre") if has_pre else ""
        post = match.group("post") if has_post else ""
        secret = whole[len(pre) : len(whole) - len(post)]
        if MARKER_START in secret or PRIVATE_MARKER in secret:
            return whole  # an earlier rule already replaced it: keeps redact() idempotent
        if item.accept is not None and not item.accept(match):
            if inner is not None:
                # `Cookie: sessionid=...`, `{"content": "DB_PASSWORD=..."}`: a refused value
                # may hold an assignment of its own. Looked at once more, one level deep only,
                # so each character is scanned at most twice.
                quoted = match.group("quoted")
                if quoted is None:
                    return pre + item.pattern.sub(inner, secret)
                quote = match.group("esc") + match.group("q")
                return f"{pre}{quote}{item.pattern.sub(inner, quoted)}{quote}"
            return whole
        if has_quoted and match.group("quoted") is not None:  # keep a literal's quotes
            quote = match.group("esc") + match.group("q")
            return f"{pre}{quote}{marker(item.kind)}{quote}"
        return f"{pre}{marker(item.kind)}{post}"

    return replace


_COMPILED: tuple[tuple[frozenset[str], re.Pattern[str], Callable[[re.Match[str]], str]], ...] = tuple(
    (frozenset(item.hints), item.pattern, _replacer(item)) for item in RULES
)
_ALL_HINTS = tuple(sorted({hint for item in RULES for hint in item.hints}))


class Redacted(str):
    """Text that redact() returned. The store redacts every write again, as the last line of
    defence, but a Redacted value passes at no cost: callers redact before they open a write
    transaction, and no redaction runs while the database is locked. Slicing or joining gives a
    plain str again, which is redacted anew."""

    __slots__ = ()


MAX_PASSES = 4  # redact() repeats until a pass changes nothing; this bounds a pathological text


def redact(text: str) -> Redacted:
    """Replace secrets with `[REDACTED:<kind>]` and <private> sections with `[PRIVATE]`.

    Passes repeat until nothing changes (at most MAX_PASSES): when two secrets touch with no
    separator, the first one's match can end inside the second, and only a second pass sees
    what is left of it. Text without secrets costs one pass, as before."""
    if type(text) is Redacted:
        return text
    for _ in range(MAX_PASSES):
        cleaner = _redact_once(text)
        if cleaner == text:
            break
        text = cleaner
    return Redacted(text)


def _redact_once(text: str) -> str:
    if not text:
        return text
    if "<" in text:
        text = _PRIVATE.sub(PRIVATE_MARKER, text)
    # Most text holds no secret at all. A substring test is ~100x cheaper than a regex scan, so
    # a rule runs only when the text contains one of its hints; each distinct hint is looked
    # for once. Folding once up front is safe: replacements insert only markers, and no rule
    # needs to see a marker.
    folded = text.lower()
    present = {hint for hint in _ALL_HINTS if hint in folded}
    for hints, pattern, replace in _COMPILED:
        if not hints or not hints.isdisjoint(present):
            text = pattern.sub(replace, text)
    return text
