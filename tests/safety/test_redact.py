"""Secret scrubbing: every corpus secret goes, <private> sections go, ordinary text stays."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lore_plugin.safety.redact import PRIVATE_MARKER, redact
from tests.secrets_corpus import NEAR_MISSES, SECRET_VALUES, SECRETS, VALUES_BY_NAME

MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]|\[PRIVATE\]")


def leaked(text: str) -> list[str]:
    return [value for value in SECRET_VALUES if value in text]


# --- the corpus ------------------------------------------------------------------------------


def test_the_corpus_covers_at_least_100_formats_with_distinctive_values() -> None:
    assert len({name for name, _ in SECRETS}) == len(SECRETS) >= 100
    assert len(set(SECRET_VALUES)) == len(SECRET_VALUES)
    for name, line in SECRETS:
        assert all(value in line for value in VALUES_BY_NAME[name]), name
    for value in SECRET_VALUES:
        assert len(value) >= 12 and not set(value) & set('"\\\n'), value


@pytest.mark.parametrize(("name", "line"), SECRETS, ids=[name for name, _ in SECRETS])
def test_every_corpus_secret_is_redacted(name: str, line: str) -> None:
    redacted = redact(line)

    assert leaked(redacted) == []
    assert MARKER.search(redacted), redacted


@pytest.mark.parametrize("label", ["note: ", "x=", "I will keep it safe: ", "- ", "'"])
def test_a_label_before_a_secret_does_not_hide_it(label: str) -> None:
    """`safe: TOKEN="..."`: a refused `name: value` must not swallow the assignment after it."""
    leaks = {name: leaked(redact(label + line)) for name, line in SECRETS}

    assert {name: found for name, found in leaks.items() if found} == {}


def test_the_whole_corpus_redacted_at_once_leaks_nothing() -> None:
    text = "\n\n".join(line for _, line in SECRETS)

    assert leaked(text)  # the check below means something
    assert leaked(redact(text)) == []


def test_secrets_inside_json_and_rendered_turns_are_redacted() -> None:
    import json

    body = json.dumps({"messages": [{"role": "user", "content": line} for _, line in SECRETS]})

    assert leaked(redact(body)) == []


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("key AKIA" + "L0REFAKE7Q9Z2B4W here", "[REDACTED:aws-key]"),
        ("ghp" + "_" + "L0reFake" * 5, "[REDACTED:github-token]"),
        ("sk-" + "ant-api03-" + "L0reFake" * 5, "[REDACTED:anthropic-key]"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
            "[REDACTED:private-key]",
        ),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.L0reFakeSig", "[REDACTED:jwt]"),
        ("xoxb" + "-1234567890-L0reFakeBot", "[REDACTED:slack-token]"),
        ("dapi" + "0123456789abcdef" * 2, "[REDACTED:databricks-token]"),
        ("SK" + "0123456789abcdef" * 2, "[REDACTED:twilio-key]"),
        ("hvs." + "L0reFake" * 4, "[REDACTED:vault-token]"),
        ("AGE-SECRET-KEY-1" + "L0REFAKE" * 8 + "QQ", "[REDACTED:age-secret-key]"),
        ("ATATT3x" + "L0reFake" * 4, "[REDACTED:atlassian-token]"),
        ("shpat" + "_" + "0123456789abcdef" * 2, "[REDACTED:shopify-token]"),
        ("lin" + "_api_" + "L0reFake" * 5, "[REDACTED:linear-key]"),
        ("tskey-auth-k" + "L0reFake1CNTRL-" + "L0reFake" * 3, "[REDACTED:tailscale-key]"),
        ("GOCSPX-" + "L0reFake" * 4, "[REDACTED:google-oauth-secret]"),
        ("ya29." + "L0reFake" * 4, "[REDACTED:google-oauth-token]"),
    ],
)
def test_markers_name_the_kind_of_secret(text: str, marker: str) -> None:
    assert marker in redact(text)


def test_connection_strings_keep_scheme_user_and_host() -> None:
    assert redact("postgres://app:L0reFakePw1@db.internal:5432/lore") == (
        "postgres://app:[REDACTED:password]@db.internal:5432/lore"
    )
    assert redact("mongodb+srv://admin:L0reFakePw2@cluster0.mongodb.net/x") == (
        "mongodb+srv://admin:[REDACTED:password]@cluster0.mongodb.net/x"
    )
    assert redact("redis://:L0reFakePw3@cache:6379/0") == "redis://:[REDACTED:password]@cache:6379/0"


def test_url_passwords_holding_at_signs_or_slashes_go_whole() -> None:
    assert redact("postgres://admin:p@ss@word@db") == "postgres://admin:[REDACTED:password]@db"
    assert redact("mysql://root:ab/cd1234@db/shop") == "mysql://root:[REDACTED:password]@db/shop"
    assert redact("see https://host.example:8443/path/@scope/pkg") == (
        "see https://host.example:8443/path/@scope/pkg"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPENAI_KEY=abc123def456", "OPENAI_KEY=[REDACTED:secret]"),
        ("export GITHUB_PAT=L0reFake1234", "export GITHUB_PAT=[REDACTED:secret]"),
        ("pw: hunter2", "pw: [REDACTED:secret]"),
        ("the password for prod is hunter2.", "the password for prod is [REDACTED:secret]."),
        ("my pin is 4921", "my pin is [REDACTED:secret]"),
        ("token=qzxkvbnwrtplmhgd", "token=[REDACTED:secret]"),
        ("mysql -u root -phunter2 shop", "mysql -u root -p[REDACTED:password] shop"),
        ("sshpass -p 'hunter 2' ssh host", "sshpass -p [REDACTED:password] ssh host"),
        (
            "Cookie: sessionid=k3jd8s7a6f5g4h3j2k1l; theme=dark",
            "Cookie: sessionid=[REDACTED:secret]; theme=dark",
        ),
        (
            "a.blob.core.windows.net/x?sv=1&sig=" + "L0reFakeSig" * 3,
            "a.blob.core.windows.net/x?sv=1&sig=[REDACTED:azure-sas]",
        ),
        ("<password>hunter2</password>", "<password>[REDACTED:secret]</password>"),
    ],
)
def test_formats_added_for_issue_14_keep_their_context(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DB_PASSWORD=supersecret", "DB_PASSWORD=[REDACTED:secret]"),
        ('password: "hunter2"', 'password: "[REDACTED:secret]"'),
        ('{\\"api_key\\": \\"abc123XYZ\\"}', '{\\"api_key\\": \\"[REDACTED:secret]\\"}'),
        ("token=Zm9vYmFy42; path=/", "token=[REDACTED:secret]; path=/"),
    ],
)
def test_assignments_keep_the_name_and_quotes_and_lose_the_value(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_an_unclosed_pem_block_is_redacted_to_the_end() -> None:
    text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1L0reFake\nabc"

    assert redact(text) == "key:\n[REDACTED:private-key]"


# --- <private> -------------------------------------------------------------------------------


def test_private_sections_are_replaced_across_lines_and_case() -> None:
    text = "keep this <private>hide\nthis</private> and <PRIVATE>this too</Private> but keep that"

    assert redact(text) == f"keep this {PRIVATE_MARKER} and {PRIVATE_MARKER} but keep that"


def test_an_unclosed_private_tag_redacts_to_the_end_of_the_text() -> None:
    assert redact("public part <private>secret diary\nmore lines") == f"public part {PRIVATE_MARKER}"


def test_private_is_lazy_so_text_between_two_sections_survives() -> None:
    text = "<private>a</private> middle text <private>b</private>"

    assert redact(text) == f"{PRIVATE_MARKER} middle text {PRIVATE_MARKER}"


# --- what must survive -----------------------------------------------------------------------

SURVIVORS = [
    "We decided to use SQLite with WAL mode because many sessions share one database.",
    "The session id is 123e4567-e89b-12d3-a456-426614174000.",
    "Commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it; see also 9fceb02.",
    "git log shows 1c002dd4b536e7479fe34593e72e6c6c1819e53b as the key commit.",
    "The key insight: fragments decay unless they are reinforced.",
    "Passwords must be at least 12 characters; rotate secrets every 90 days.",
    "def check_password(password: str) -> bool: return verify(password)",
    'password = request.form["password"]',
    "token = make_token(user)",
    "self.token = token",
    "api_key: str | None = None",
    "password: Optional[str] = None",
    "api_key: SecretStr",
    'if token is None: raise ValueError("missing token")',
    "The tokenizer: bert-base-uncased loads from tokenizer_config.json.",
    "Set max_tokens = 1024 and temperature = 0.2.",
    '"input_tokens": 10, "output_tokens": 5, "token_count": 1234',
    "password_reset_url: https://example.com/reset?next=/home",
    "PWD=/home/alice/projects/lore",
    "export GITHUB_TOKEN=$GITHUB_TOKEN",
    "password: ${DB_PASSWORD}",
    'api_key = os.environ["OPENAI_API_KEY"]',
    "API_KEY = os.environ['API_KEY']",
    "client = Client(api_key=settings.API_KEY, timeout=30)",
    "SECRET_KEY = get_secret()",
    "login(user, password=pw)",
    'token = "<your-token-here>"',
    "The bearer of bad news was late; the Authorization header must be set.",
    "sk-learn-compatible-estimators are not keys.",
    "docker run -u 1000:1000 image",
    "Our endpoint is https://api.example.com:8443/v1/items?page=2.",
    "Clone ssh://git@github.com:22/owner/repo or git@github.com:owner/repo.git",
    "The private key file lives at ~/.ssh/id_ed25519 (never commit it).",
    "sha256 is 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    "Use `lore_plugin.transcript.read_delta` and `ScoredFragment` from types.py.",
    "import numpy as np; matrix = np.zeros((100_000, 384), dtype=np.float32)",
    "Die Übersetzung: 東京で会いましょう — ça marche.",
]


@pytest.mark.parametrize("text", SURVIVORS)
def test_ordinary_prose_and_code_survive(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("name", "text"), NEAR_MISSES, ids=[name for name, _ in NEAR_MISSES])
def test_near_misses_of_each_format_survive_untouched(name: str, text: str) -> None:
    assert redact(text) == text


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact("\n".join(line for _, line in SECRETS))

    assert redact(once) == once


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from([line for _, line in SECRETS]),
            st.sampled_from([text for _, text in NEAR_MISSES]),
            st.sampled_from(SURVIVORS),
            st.text(max_size=40),
        ),
        max_size=6,
    ),
    glue=st.sampled_from(["", " ", "\n", "=", ": ", '"']),
)
def test_redacting_already_redacted_text_changes_nothing(parts: list[str], glue: str) -> None:
    once = redact(glue.join(parts))

    assert redact(once) == once


def test_empty_text_stays_empty() -> None:
    assert redact("") == ""


# --- fuzz ------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400))
def test_redact_never_raises_on_arbitrary_text(text: str) -> None:
    assert isinstance(redact(text), str)


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=80),
    entry=st.sampled_from(SECRETS),
    after=st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=80),
)
def test_a_secret_between_lines_of_random_text_is_still_redacted(
    before: str, entry: tuple[str, str], after: str
) -> None:
    name, line = entry

    redacted = redact(f"{before}\n{line}\n{after}")

    assert not [value for value in VALUES_BY_NAME[name] if value in redacted]


def test_secrets_glued_together_are_all_redacted_in_one_call() -> None:
    """A first match can end inside the next secret when nothing separates them; redact()
    repeats until a pass changes nothing, so no part of the second one reaches the LLM."""
    lines = dict(SECRETS)
    for first, second in (("shopify-token", "url-password-with-slash"), ("vault-token", "env-pat")):
        glued = lines[first] + lines[second]
        once = redact(glued)
        assert redact(once) == once
        assert not [v for v in SECRET_VALUES if v in once], once
