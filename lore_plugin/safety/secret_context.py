"""Is this name a secret's name, and does this value look like a secret? Heuristics for redact.py.

A provider token names itself; everything else is judged by context: `DB_PASSWORD=hunter2` is a
secret because of its name, `password = request.form["password"]` is code, and `token_count = 12`
is neither. These functions keep that judgement in one place, pure and cheap (no regex here runs
on more than one key or one value, and each is linear). The last section holds the `accept`
checks redact.py's rules call with their whole match.
"""

from __future__ import annotations

import base64
import binascii
import re

PRIVATE_MARKER = "[PRIVATE]"
MARKER_START = "[REDACTED:"

NOT_SECRET = 0
WEAK = 1  # a secret only when the value looks random: key, auth, pat, dsn, session ids
STRONG = 2  # any literal value is a secret: password, token, secret, api key

# Key names are split into words (DB_PASSWORD, apiKey, x-api-key, client.secret) and judged by
# the last secret word in them.
_KEY_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STRONG_WORDS = frozenset(
    "password passwd passphrase passcode pwd pw pass secret secrets token credential credentials"
    " creds apikey".split()
)
# "<word> key" is a strong name (api key, private key, AccountKey); "key" alone is weak: in code
# it is a dict key, a sort key, a primary key far more often than a credential.
_KEY_QUALIFIERS = frozenset(
    "api access account private secret signing encryption encrypt decrypt master shared license"
    " app service admin client consumer webhook hmac jwt sas storage subscription deploy root"
    " auth session cipher aes crypto priv wallet".split()
)
_WEAK_WORDS = frozenset(
    "key auth pat dsn psk salt session sessionid sid phpsessid jsessionid csrftoken xsrf".split()
)
# Long words that also hide glued to another (dbpassword, authtoken, mysecret).
_GLUED = ("password", "passwd", "passphrase", "secret", "token", "apikey", "credentials")
# A word after the secret word that makes the name describe a secret rather than hold one:
# token_count, password_policy, secret_name, token_url, api_key_id.
_METADATA = frozenset(
    "name names id ids type types url uri urls path file files dir length len count counter ttl"
    " expiry expires expiration exp env var header field prefix policy endpoint scope scopes hint hints"
    " label format size limit limits min max timeout rate ratio required enabled regex pattern"
    " help prompt mode version index idx kind style location source provider cache manager"
    " budget usage method strategy rotation age created updated at date time offset reset"
    " validator valid check error errors message msg text input placeholder description desc"
    " doc docs example template generator class cls fn func callback handler hasher hashers"
    " algorithm algo strength complexity store helper helpers".split()
)


def key_strength(key: str) -> int:
    """How surely a value under this name is a secret: NOT_SECRET, WEAK or STRONG."""
    if len(key) > 100:  # no real setting has such a name; bounds the work too
        return NOT_SECRET
    parts = [part.lower() for part in _KEY_PART.findall(key)]
    for i in range(len(parts) - 1, -1, -1):
        strength = _word_strength(parts, i)
        if strength:
            after = parts[i + 1 :]
            if parts[i] == "session" and after[:1] == ["id"]:
                after = after[1:]  # session_id is the cookie, not its metadata
            return NOT_SECRET if any(word in _METADATA for word in after) else strength
    return NOT_SECRET


def _word_strength(parts: list[str], i: int) -> int:
    word = parts[i]
    if word in _STRONG_WORDS:
        return STRONG
    if word == "key" and i > 0 and parts[i - 1] in _KEY_QUALIFIERS:
        return STRONG
    if word == "key" and i > 0 and parts[i - 1] in ("public", "pub"):
        return NOT_SECRET  # PublicKey = ... in a WireGuard peer is meant to be shared
    if word.endswith("key") and word[:-3] in _KEY_QUALIFIERS:  # apikey, privatekey
        return STRONG
    if word in _WEAK_WORDS:
        return WEAK
    if any(word.endswith(glued) for glued in _GLUED):
        return STRONG
    return NOT_SECRET


# --- values ----------------------------------------------------------------------------------

# Values that name or template a secret rather than hold it: $VAR, ${VAR}, {{ var }}, <your-key>,
# %(pw)s, paths, masks, and values an earlier rule already replaced.
_REFERENCE_START = ("$", "{", "<", "%", "/", "~", "./", "../", "*", "[")
_NOT_SECRET_WORDS = frozenset(
    "true false none null nil undefined required optional yes no on off empty hidden masked redacted".split()
)
_LOWER_IDENTIFIER = re.compile(r"[a-z_]+(?:\.[a-z_]+)*")  # token, self.password, none
_IDENTIFIER = re.compile(r"[A-Za-z_]+")  # SecretStr, Optional: type names and words
# settings.API_KEY. Possessive, and starting only where a name starts: a search (as the tests
# time it) over `a_a_a_...` must not rescan the run from every position in it.
_ATTRIBUTE = re.compile(r"(?<![A-Za-z0-9_.])[a-z_][a-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)++")
_NUMBER = re.compile(r"[+-]?[0-9][0-9_.,:]*%?")  # 3600, 0.95, 1.2.3, 1000:1000
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_CONSONANT_RUN = re.compile(r"[^aeiouy]{5}")
_DIGIT_RUN = re.compile(r"[0-9]+")


def mixed(value: str) -> bool:
    """Random tokens mix digits, upper and lower case; words and hex hashes do not."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


def is_reference(value: str) -> bool:
    return value.startswith(_REFERENCE_START) or value.lower() in _NOT_SECRET_WORDS


def is_mask(value: str) -> bool:
    """`xxxx`, `****`, `...`: a placeholder someone typed instead of the secret."""
    return set(value.lower()) <= set("x*. -_")


def is_small_number(value: str) -> bool:
    """Ports, durations, counts and versions; a long digit string may be a PIN or an id."""
    return bool(_NUMBER.fullmatch(value)) and sum(c.isdigit() for c in value) < 12


def random_letters(value: str) -> bool:
    """An all-letter value in one case that reads as noise, not as a word or identifier.

    English and code identifiers have vowels every few letters; random strings over 26 letters
    have few (about one in five) and long consonant runs. Twenty letters with no separator is
    not a name anyone types in code.
    """
    if len(value) >= 20:
        return True
    if len(value) < 10:
        return False
    lower = value.lower()
    vowels = sum(c in "aeiouy" for c in lower)
    return vowels < 0.2 * len(lower) or bool(_CONSONANT_RUN.search(lower))


def looks_random(value: str) -> bool:
    """A value that is a generated token rather than a word, number, name or id."""
    if len(value) < 12 or _UUID.fullmatch(value) or "://" in value or is_small_number(value):
        return False
    if _HEX.fullmatch(value):
        return len(value) >= 16
    has_digit = any(c.isdigit() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    if has_digit and has_upper and has_lower:
        return True
    if value.isalpha():
        if has_upper and has_lower:
            # base64 is about half capitals; camelCase names (XMLHttpRequestHandler) far fewer.
            return len(value) >= 16 and sum(c.isupper() for c in value) > 0.3 * len(value)
        return random_letters(value)
    if has_digit and (has_upper or has_lower):
        # a8f3k2m9q1x7 interleaves; python311 or utf8mb4 do not.
        return len(_DIGIT_RUN.findall(value)) >= 3
    return len(value) >= 16 and bool(_BASE64.fullmatch(value)) and (has_upper or has_lower)


def basic_credentials(value: str) -> bool:
    """base64 of `user:password`, as in Docker's config.json "auth" and .npmrc `_auth`."""
    if len(value) < 8 or len(value) > 400 or not _BASE64.fullmatch(value):
        return False
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def literal_is_secret(value: str, strength: int) -> bool:
    """A quoted string literal (or XML text) under a secret's name."""
    value = value.strip()
    if not value or is_reference(value) or is_mask(value):
        return False
    if strength == STRONG:
        return True
    return looks_random(value) or basic_credentials(value)


def bare_is_secret(value: str, strength: int, sep: str, env: bool) -> bool:
    """An unquoted value: the same, but code (calls, attributes, names) is not a secret."""
    if not value or is_reference(value) or is_mask(value) or "://" in value:
        return False  # password_reset_url: https://...; credentials in URLs have their own rule
    if is_small_number(value):  # token_ttl: 3600, max_token_length = 512
        return False
    if env:  # DB_PASSWORD=hunter: an env file holds literals, never code
        if strength == STRONG:
            return True
        return looks_random(value) or basic_credentials(value) or not value.isalpha()
    if "(" in value or "[" in value or _ATTRIBUTE.fullmatch(value):
        return False  # token = make_token(), pw = os.environ["PW"], api_key=settings.API_KEY
    if strength == WEAK:
        return looks_random(value) or basic_credentials(value)
    if sep == ":" and _IDENTIFIER.fullmatch(value) or _LOWER_IDENTIFIER.fullmatch(value):
        # password: str, "the token: expired", self.token = token; but not token=qzxkvbnwrtpl
        return value.isalpha() and random_letters(value)
    return len(value) >= 3


# --- whole matches: the `accept` checks of redact.py's rules ---------------------------------


def assignment_is_secret(match: re.Match[str]) -> bool:
    strength = key_strength(match.group("key"))
    if strength == NOT_SECRET:
        return False
    if match.group("quoted") is not None:
        return literal_is_secret(match.group("quoted"), strength)
    key = match.group("key")
    env = key.isupper() and match.group("pre") == key + "="  # DB_PASSWORD=hunter, mid-sentence
    return bare_is_secret(match.group("bare"), strength, match.group("sep"), env)


def env_line_is_secret(match: re.Match[str]) -> bool:
    """An env file holds literals, never code: even a weak name (OPENAI_KEY, GITHUB_PAT,
    SENTRY_DSN) holds a secret unless its value is a plain word."""
    strength = key_strength(match.group("key"))
    if strength == NOT_SECRET:
        return False
    quoted = match.group("quoted")
    value = quoted.strip() if quoted is not None else match.group("bare")
    return bare_is_secret(value, strength, "=", env=True)


def literal_under_name_is_secret(match: re.Match[str]) -> bool:
    return literal_is_secret(match.group("secret"), key_strength(match.group("key")))


def named_block_is_secret(match: re.Match[str]) -> bool:
    return key_strength(match.group("key")) != NOT_SECRET


def cli_value_is_secret(match: re.Match[str]) -> bool:
    value = match.group("secret").strip("'\"")
    # `psql --password -h db`: a flag after the flag means it prompts
    return bool(value) and not value.startswith(("$", "{", "<", "%", "-")) and not value.isdigit()


def url_password_is_secret(match: re.Match[str]) -> bool:
    """host:8080/path/@scope is a port and a path, not user:password@host."""
    value = match.group("secret")
    port, _, _ = value.partition("/")
    return not (port.isdigit() and len(port) <= 5 and ("/" in value or "." in match.group("user")))


def prose_value_is_secret(match: re.Match[str]) -> bool:
    """ "the password for prod is hunter2" but not "... is stored in vault" or "is 12 chars"."""
    value = match.group("secret")
    if value.startswith(("$", "{", "<", "%", "/", "~")) or "://" in value or "(" in value:
        return False
    if value.isdigit():
        return len(value) >= 4 and match.group("word").lower() in ("pin", "passcode")
    if value.isalpha():
        return (value.islower() or value.isupper()) and random_letters(value) or mixed(value)
    return len(value) >= 4  # digits or symbols in a word: hunter2, P@ss, s3cret!


def keyword_blob_is_secret(match: re.Match[str]) -> bool:
    value = match.group("secret").rstrip("=")
    if _HEX.fullmatch(value):
        # After "key", 40 hex digits are far more often a git SHA ("the key commit ...") than a
        # key; after "secret", "token" or "password" they are the old GitHub token shape.
        return match.group("word").lower() != "key" or len(value) != 40
    return mixed(value) or ("_" not in value and looks_random(value))


def htpasswd_sets_password(match: re.Match[str]) -> bool:
    return "b" in match.group("opts") and cli_value_is_secret(match)
