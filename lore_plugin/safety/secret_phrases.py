"""Secrets told by the words around them that a `name = value` rule reads too narrowly: a
passphrase with spaces, a connection-string field, a password on a command line, a username and
password in prose, recovery codes and seed phrases (issue 25).

redact.py runs these after the provider tokens and before its generic context rules, so
`password: correct horse battery staple` goes whole instead of losing only its first word. Each
pattern starts at a fixed word or flag and reads a bounded, possessive run after it: linear in
the length of the text (tests/safety/test_redact_linear.py times every one).
"""

from __future__ import annotations

import re

from .secret_context import STRONG, is_reference, key_strength
from .secret_tokens import Rule, rule

_I = re.IGNORECASE
_M = re.MULTILINE

# One password-like value: no spaces, up to a closing bracket or quote, and trailing sentence
# punctuation stays in the text (`password CoffeeBeans22.`).
_VALUE = r"(?:[^\s\"'`,;)\]}]|[,;)\]}](?=[^\s\"'`]))++"
_QUOTED_ARG = r"'[^'\n]{1,200}+'|\"[^\"\n]{1,200}+\"|[^\s'\"\-]\S*+"
_COMMAND_TAIL = r"[^\n|;&]{0,200}?(?<!\S)"  # the rest of one command, bounded
# A word of a passphrase: no quote, bracket, `=` or sentence punctuation inside it, and bounded:
# in a long run without spaces (`passa:passa:...`) each start then reads a few characters, not
# the rest of the run.
_WORD = r"[^\s\"'`=;,(){}\[\]<>#]{1,64}+"
_PASS_KEY = (
    r"(?<![A-Za-z0-9_.\-])(?P<key>mot[ \t]de[ \t]passe|pass[ \t]phrase|passwort"
    r"|[A-Za-z0-9_.\-]++)"
)

# The first word of a description of a password, not of a password: "password: must be 12
# characters", "the password is stored in Vault".
_NOT_A_PHRASE = frozenset(
    "a an the is are was be been being must should will can may not no none null nil see set"
    " stored kept saved managed in at on from by for of to as with without and or if when"
    " required optional missing empty wrong invalid expired incorrect changed rotated"
    " reset too very still now same different your my our their his her its this that here"
    " there unknown hidden redacted masked".split()
)
_DESCRIBING = frozenset(
    "characters chars character digits letters symbols long length vault keychain manager"
    " 1password bitwarden lastpass env environment file policy rules your password passwords"
    " hashed hash encrypted bcrypt below above enter type field".split()
)
_VERSION = re.compile(r"v?\d++(?:\.\d++)++")
_EMAIL = re.compile(r"(?<![^@\s])[^@\s]++@[A-Za-z0-9\-]++\.[A-Za-z0-9.\-]++")  # starts a word: linear
_CODE = re.compile(r"[A-Za-z0-9]++(?:-[A-Za-z0-9]++)?")
_CODE_SEPARATOR = re.compile(r"[\s,]++")


def passwordish(value: str) -> bool:
    """A bare value that reads as a password rather than a word, name, number or path: letters
    with a digit or a symbol, or mixed case with a digit (AdminPw#9, hunter2, R0uterPw!)."""
    value = value.strip("'\"`")
    if len(value) < 6 or len(value) > 200 or is_reference(value) or "://" in value:
        return False
    if _VERSION.fullmatch(value) or _EMAIL.fullmatch(value) or value.lower() in _NOT_A_PHRASE:
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    symbols = any(not c.isalnum() for c in value)
    if not letters or "/" in value or value.count(".") > 1 and not digits:
        return False  # 493817, src/main2.py, example.co.uk
    return digits or symbols and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _phrase_is_secret(match: re.Match[str]) -> bool:
    """Two to eight words under a password's name, to the end of the line."""
    key = match.group("key").lower().replace("\t", " ")
    if key not in ("mot de passe", "pass phrase", "passwort") and key_strength(key) != STRONG:
        return False
    words = match.group("secret").split()
    first = words[0].lower().strip("'\"`")
    if first in _NOT_A_PHRASE or is_reference(first) or first.endswith(":"):
        return False
    return not any(word.lower().strip(".,") in _DESCRIBING for word in words)


def _quoted_phrase_is_secret(match: re.Match[str]) -> bool:
    value = match.group("secret").strip()
    return bool(value) and not is_reference(value) and value.split()[0].lower() not in _NOT_A_PHRASE


def _prose_phrase_is_secret(match: re.Match[str]) -> bool:
    words = match.group("secret").split()
    if len(words) < 2 or words[0].lower() in _NOT_A_PHRASE or is_reference(words[0]):
        return False
    return not any(word.lower().strip(".,") in _DESCRIBING for word in words)


def _value_is_passwordish(match: re.Match[str]) -> bool:
    return passwordish(match.group("secret"))


def _pair_is_passwordish(match: re.Match[str]) -> bool:
    """After `user/` a value must look generated, not be a ref or an id (root/a1b2c3)."""
    value = match.group("secret")
    return passwordish(value) and any(c.isupper() or not c.isalnum() for c in value)


def _cli_value(match: re.Match[str]) -> bool:
    value = match.group("secret").strip("'\"")
    return bool(value) and not value.startswith(("$", "{", "<", "%", "-")) and not value.isdigit()


def _codes(match: re.Match[str]) -> bool:
    """Recovery codes hold digits; a seed phrase is twelve or more lower-case words."""
    tokens = _CODE_SEPARATOR.split(match.group("secret").strip())
    if len(tokens) >= 12 and all(t.isalpha() and t.islower() for t in tokens):
        return True
    return len(tokens) >= 2 and all(_CODE.fullmatch(t) and any(c.isdigit() for c in t) for t in tokens)


def _pgpass(match: re.Match[str]) -> bool:
    value = match.group("secret")  # bob:*:19000:0:99999:7::: is a shadow line, not a password
    return value != "*" and not is_reference(value) and not set(value) <= set("0123456789:")


PHRASE_RULES: tuple[Rule, ...] = (
    # password: correct horse battery staple / DB_PASSWORD=two words / passphrase → four words.
    # Only to the end of the line (or a clause's end), so `password: x` followed by prose keeps it.
    rule(
        "secret",
        "pass pwd",
        r"(?P<pre>" + _PASS_KEY + r"\\?[\"']?[ \t]*+(?::=|=|:|\u2192|\u2014|->)[ \t]*+)"
        r"(?P<secret>" + _WORD + r"(?:[ \t]++" + _WORD + r"){1,7}+)"
        r"(?=[ \t]*+(?:$|[.!?](?:\s|$)|[;,(]|\Z))",
        _I | _M,
        _phrase_is_secret,
    ),
    # the GPG passphrase is 'violet anchors drift slowly'; use passphrase `winter harbor echo`
    rule(
        "secret",
        "pass pwd",
        r"(?P<pre>\b(?:pass(?:word|phrase|code)?|pwd)s?[ \t]++(?:(?:is|was|will[ \t]be|of)[ \t]++"
        r"|:[ \t]*+)?(?P<q>[\"'`]))(?P<secret>[^\"'`\n]{3,200}+)(?P<post>(?P=q))",
        _I,
        _quoted_phrase_is_secret,
    ),
    # my wifi password is blue lantern under the bridge (to the end of the line)
    rule(
        "secret",
        "pass",
        r"(?P<pre>\b(?:password|passphrase|passcode|passwort)"
        r"(?:[ \t]++(?:for|of|on|to|at|in|from)(?:[ \t]++[^\s:]{1,40}+){1,3}?)?[ \t]++(?:is|was|will[ \t]be)"
        r"(?:[ \t]*+:)?[ \t]++)(?P<secret>" + _WORD + r"(?:[ \t]++" + _WORD + r"){1,7}+)"
        r"(?=[ \t]*+(?:$|[.!?](?:\s|$)|\(|\Z))",
        _I | _M,
        _prose_phrase_is_secret,
    ),
    # Connection strings: Password=Blue Sky 42!; a field runs to the next `;`, spaces and all.
    rule(
        "password",
        "pass pwd",
        r"(?P<pre>(?<![A-Za-z0-9_])(?:password|pwd|passwd)[ \t]*+=[ \t]*+)"
        r"(?P<secret>[^;\n\"'{}][^;\n\"']{0,200}+)(?=;)",
        _I,
        _cli_value,
    ),
    # ~/.pgpass: hostname:port:database:username:password
    rule(
        "password",
        ":",
        r"^(?P<pre>[ \t]*+[A-Za-z0-9_.\-*\[\]]++:(?:\d{1,5}+|\*):[^\s:]++:[^\s:]++:)(?P<secret>\S++)$",
        _M,
        _pgpass,
    ),
    # --- command lines --------------------------------------------------------------------
    rule(
        "password",
        "ldap",
        r"(?P<pre>\bldap[a-z]*+\b" + _COMMAND_TAIL + r"-w[ \t]++)(?P<secret>" + _QUOTED_ARG + ")",
        0,
        _cli_value,
    ),
    rule(
        "password",
        "storepass keypass",
        r"(?P<pre>(?<!\S)-(?:src|dest|new)?(?:store|key)pass[ \t]++)(?P<secret>" + _QUOTED_ARG + ")",
        _I,
        _cli_value,
    ),
    # sqlplus scott/tiger@orcl, rman target sys/pw@cdb
    rule(
        "password",
        "sqlplus sqlldr exp imp rman dgmgrl",
        r"(?P<pre>\b(?:sqlplus|sqlldr|expdp|impdp|exp|imp|rman|dgmgrl)\b" + _COMMAND_TAIL
        + r"(?:target[ \t]++|catalog[ \t]++)?[A-Za-z0-9_$#]++/)(?P<secret>[^\s@/]++)(?P<post>@)",
        _I,
        _cli_value,
    ),
    # net use Z: \\server\share PASSWORD /user:DOMAIN\name
    rule(
        "password",
        "net use",
        r"(?P<pre>\bnet[ \t]++use(?:[ \t]++(?:[A-Za-z]:|\*|\\\\\S++|/\S++))*+[ \t]++)"
        r"(?P<secret>[^\s/\\*]\S*+)",
        _I,
        _cli_value,
    ),
    # -p PASSWORD where the tool means a password (mongosh, az login, influx, ...), not a port
    rule(
        "password",
        "mongo az influx pgcli vault",
        r"(?P<pre>\b(?:mongosh|mongo|mongodump|mongorestore|mongoexport|mongoimport|mongostat"
        r"|mongotop|mongofiles|az[ \t]++login|influx|rabbitmqadmin)\b" + _COMMAND_TAIL
        + r"-p[ \t]++)(?P<secret>" + _QUOTED_ARG + ")",
        0,
        _cli_value,
    ),
    rule(
        "password",
        "mssql-cli",
        r"(?P<pre>\bmssql-cli\b" + _COMMAND_TAIL + r"-P[ \t]*+)(?P<secret>" + _QUOTED_ARG + ")",
        0,
        _cli_value,
    ),
    rule(
        "password",
        "rabbitmqctl",
        r"(?P<pre>\brabbitmqctl[ \t]++(?:add_user|change_password)[ \t]++\S++[ \t]++)"
        r"(?P<secret>" + _QUOTED_ARG + ")",
        0,
        _cli_value,
    ),
    rule(
        "secret",
        "gh secret",
        r"(?P<pre>\bgh[ \t]++secret[ \t]++set\b" + _COMMAND_TAIL + r"(?:-b|--body)(?:[ \t]++|=))"
        r"(?P<secret>" + _QUOTED_ARG + ")",
        0,
        _cli_value,
    ),
    # echo 'pw' | sudo -S ..., --askpass <(echo pw), /p:pw (xfreerdp)
    rule(
        "password",
        "sudo",
        r"(?P<pre>\becho[ \t]++)(?P<secret>" + _QUOTED_ARG + r")"
        r"(?=[ \t]*+\|[ \t]*+sudo\b[^\n|]{0,40}?[ \t]-[A-Za-z]*S)",
        0,
        _cli_value,
    ),
    rule(
        "password",
        "<(echo",
        r"(?P<pre>\b(?:askpass|pass[a-z\-]{0,20}+|[a-z\-]{0,20}?key)[ \t=]++<\(echo[ \t]++)"
        r"(?P<secret>[^\s)]++)(?P<post>\))",
        _I,
        _cli_value,
    ),
    rule("password", "/p:", r"(?P<pre>(?<!\S)/p(?:assword)?:)(?P<secret>\S++)", _I, _cli_value),
    # --- credentials in prose ---------------------------------------------------------------
    # "ssh in with password X", "account a@b.c, pwd X", "(pw X)"; "pass X" only after a user
    # name ("user alice pass X"): "the tests pass test_v2 now" is not a password.
    rule(
        "password",
        "pass pw",
        r"(?P<pre>(?:\b(?:password|passwd|passcode|pwd|pw)|\buser(?:name)?[ \t:=]++\S{1,64}+[ \t,]++pass)"
        r"[ \t]++)(?P<secret>" + _VALUE + ")",
        _I,
        _value_is_passwordish,
    ),
    # admin/X, login: admin / X, creds are bob:X, Credentials: root / X
    rule(
        "password",
        "admin root login cred user account",
        r"(?P<pre>(?:\b(?:login|logins|credentials|creds|account|user(?:name)?)"
        r"(?:[ \t]++(?:is|are)|[ \t]*+:)?[ \t]++[\w.@\-]{1,40}+"
        r"|(?<![\w/.~@\-])(?:admin|administrator|root|sa|postgres|guest|ubuntu|superuser))"
        r"[ \t]*+[/:][ \t]*+)(?P<secret>" + _VALUE + ")",
        _I,
        _pair_is_passwordish,
    ),
    # u: admin p: X
    rule(
        "password",
        "p:",
        r"(?P<pre>\bu(?:ser)?:[ \t]*+\S++[ \t,]++p(?:ass|w|wd)?:[ \t]*+)(?P<secret>" + _VALUE + ")",
        _I,
        _value_is_passwordish,
    ),
    # log in as deploy with X; log into the NAS as admin with X
    rule(
        "password",
        "log",
        r"(?P<pre>\blog(?:[ \t]?in(?:to)?|[ \t]?on)\b[^\n]{0,40}?\bwith[ \t]++)(?P<secret>" + _VALUE + ")",
        _I,
        _value_is_passwordish,
    ),
    # Recovery codes: a b c / seed phrase: twelve words ...
    rule(
        "recovery-codes",
        "recovery backup seed mnemonic bip",
        r"(?P<pre>\b(?:(?:recovery|backup|one-time|2fa|mfa)[ \t\-]codes?|(?:seed|recovery|mnemonic"
        r"|secret|backup)[ \t\-](?:phrase|words)|mnemonic|bip-?39[ \t]words)\b[^\n:=]{0,40}?"
        r"(?:[ \t]*+[:=][ \t]*+\n?|[ \t]++(?:is|are|was|were)[ \t]++)[\"']?)"
        r"(?P<secret>[A-Za-z0-9\-]{2,12}+(?:(?:[ \t,]++|\n)[A-Za-z0-9\-]{2,12}+){1,31}+)",
        _I,
        _codes,
    ),
)
