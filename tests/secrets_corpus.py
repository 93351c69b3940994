"""Fake secrets in many formats, each embedded in a sentence the way it shows up in a session.

Other tests seed transcripts with these and check that no SECRET_VALUES substring reaches the
LLM request body or the database file, so every value is distinctive (it contains "L0reFake"
or comes from a fixed hash) and holds no character that JSON would escape.

The values are assembled at import time by concatenation, so this file holds no literal
token that a secret scanner could mistake for a real leak.
"""

from __future__ import annotations

import base64
import hashlib

_NOISE = "7Qx9mZ2vB4nW8kR1tY6uI3oP5aS0dFgHjKlZxCvBnMq3Wr8Et5Yu1Io4Pa7Sd2Fg9Hj6Kl0Zm3Xn8Cb5Vq2"


def _fake(tag: str, length: int) -> str:
    """Letters and digits: 'L0reFake' + tag, padded with fixed noise to exactly `length`."""
    value = ("L0reFake" + tag + _NOISE * 3)[:length]
    assert len(value) == length
    return value


def _upper(tag: str, length: int) -> str:
    """Upper case and digits only (AWS key ids)."""
    value = ("L0REFAKE" + tag + "7Q9Z2B4W8R1Y6U3P5S0D" * 2)[:length]
    assert len(value) == length
    return value


def _hex(tag: str, length: int) -> str:
    return (hashlib.sha256(b"lore-fake-" + tag.encode()).hexdigest() * 2)[:length]


_PEM_BODY = {
    kind: ("MII" + _fake(f"Pem{kind.replace(' ', '')}", 61), _fake(f"PemTail{kind[:2]}", 40))
    for kind in ("RSA", "EC", "OPENSSH", "")
}


def _pem(kind: str) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    head, tail = _PEM_BODY[kind]
    return f"-----BEGIN {label}-----\n{head}\n{tail}==\n-----END {label}-----"


_JWT_HEADER = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"  # {"alg":"HS256","typ":"JWT"}
_JWT_PAYLOAD = (
    base64.urlsafe_b64encode(b'{"sub":"L0reFakeJwtUser","admin":true}').decode().rstrip("=")
)
_JWT_SIGNATURE = _fake("JwtSig-", 43)
_BASIC = base64.b64encode(b"lore:L0reFakeBasicPw42").decode()

# (format name, sentence holding the secret, the secret values inside it)
_ENTRIES: list[tuple[str, str, tuple[str, ...]]] = []


def _add(name: str, template: str, *values: str) -> None:
    line = template.format(*values)
    assert all(value in line for value in values), name
    _ENTRIES.append((name, line, values))


_add(
    "anthropic-key",
    "I exported ANTHROPIC_API_KEY={0} before running the evals.",
    "sk-" + "ant-api03-" + _fake("Anthropic", 86) + "-AA",
)
_add(
    "openai-legacy-key",
    "The old script still has openai.api_key = '{0}' hard-coded.",
    "sk-" + _fake("OpenAI", 48),
)
_add(
    "openai-project-key",
    "Use the project key {0} for the staging org.",
    "sk-" + "proj-" + _fake("Proj_", 40) + "-" + _fake("Proj2", 20),
)
_add(
    "aws-access-key-id",
    "The deploy user's access key id is {0} (rotated monthly).",
    "AKIA" + _upper("KEYID", 16),
)
_add(
    "aws-session-key-id",
    "Temporary credentials came back as {0} from STS.",
    "ASIA" + _upper("SESSN", 16),
)
_add(
    "aws-secret-access-key",
    "In ~/.aws/credentials: aws_secret_access_key = {0}",
    _fake("AwsSecret/", 30) + "+" + _fake("Aws", 9),
)
_add(
    "github-classic-pat",
    "Clone with git clone https://{0}@github.com/acme/api.git please.",
    "ghp" + "_" + _fake("GhPat", 36),
)
_add(
    "github-oauth-token",
    "The OAuth app handed back {0} as the access token.",
    "gho" + "_" + _fake("GhOauth", 36),
)
_add(
    "github-user-token",
    "gh auth status shows the token {0} for the user.",
    "ghu" + "_" + _fake("GhUser", 36),
)
_add(
    "github-app-token",
    "The installation token {0} expires in an hour.",
    "ghs" + "_" + _fake("GhApp", 36),
)
_add(
    "github-refresh-token",
    "Store the refresh token {0} in the keychain, not the repo.",
    "ghr" + "_" + _fake("GhRefresh", 36),
)
_add(
    "github-fine-grained-pat",
    "CI uses the fine-grained PAT {0} with read-only scope.",
    "github" + "_pat_" + "11A" + _fake("GhFine", 19) + "_" + _fake("GhFine2", 59),
)
_add("gitlab-pat", "GITLAB access: {0} (maintainer role).", "glpat" + "-" + _fake("Gitlab", 20))
_add(
    "slack-bot-token",
    "The bot posts with {0} into #deploys.",
    "xoxb" + "-123456789012-1234567890123-" + _fake("SlackBot", 24),
)
_add(
    "slack-user-token",
    "My personal Slack token is {0}, do not share it.",
    "xoxp" + "-123456789012-123456789012-1234567890123-" + _fake("SlackUser", 32),
)
_add(
    "slack-app-token",
    "Socket mode needs the app-level token {0}.",
    "xapp" + "-1-A0" + _upper("APP", 9) + "-1234567890123-" + _hex("slack-app", 64),
)
_add(
    "slack-webhook",
    "Alerts go to https://hooks.slack.com/services/T0LORE1/B0LORE2/{0} today.",
    _fake("Webhook", 24),
)
_add(
    "google-api-key",
    "Maps works again after I set key={0} in the URL.",
    "AIza" + _fake("Google_", 35),
)
_add(
    "stripe-secret-key",
    "Billing tests failed because {0} is a live key.",
    "sk" + "_live_" + _fake("Stripe", 32),
)
_add(
    "stripe-restricted-key",
    "The reporting job uses the restricted key {0}.",
    "rk" + "_live_" + _fake("StripeRk", 32),
)
_add(
    "stripe-webhook-secret",
    "Verify signatures with the endpoint secret {0}.",
    "whsec" + "_" + _fake("Whsec", 32),
)
_add(
    "bearer-header",
    "curl -H 'Authorization: Bearer {0}' https://api.internal/v1/me",
    _fake("Bearer.", 30) + "." + _fake("Bearer2", 12),
)
_add("basic-auth-header", "The proxy wants Authorization: Basic {0} on every call.", _BASIC)
# The header is the standard HS256 one, so only the payload and signature are distinctive.
_add(
    "jwt",
    "The session cookie was " + _JWT_HEADER + ".{0}.{1} when it broke.",
    _JWT_PAYLOAD,
    _JWT_SIGNATURE,
)
_add(
    "pem-rsa-private-key",
    "Here is the deploy key:\n" + _pem("RSA") + "\nand that's all.",
    *_PEM_BODY["RSA"],
)
_add("pem-ec-private-key", "Signing key for the webhooks:\n" + _pem("EC") + "\n", *_PEM_BODY["EC"])
_add(
    "pem-openssh-private-key", "My ~/.ssh/id_ed25519 is\n" + _pem("OPENSSH"), *_PEM_BODY["OPENSSH"]
)
# A service-account JSON file keeps the key on one line with literal \n escapes.
_add(
    "pem-pkcs8-private-key",
    'service-account.json had "private_key": "' + _pem("").replace("\n", "\\n") + '\\n",',
    *_PEM_BODY[""],
)
_add("env-password", "My .env has DB_PASSWORD={0} and DB_USER=lore.", "L0reFake-Pg-Pass!92")
_add(
    "yaml-password",
    "database:\n  host: db.internal\n  password: {0}\n  port: 5432",
    "L0reFakeYaml#Pw77",
)
_add(
    "json-api-key",
    'The config is {{"service": "geo", "api_key": "{0}", "retries": 3}}.',
    "L0reFakeJsonApiKey-4471",
)
_add(
    "python-secret-key",
    "settings.py still says SECRET_KEY = '{0}' in production.",
    "L0reFake-django-s3cret-k3y",
)
_add(
    "quoted-token-assignment",
    'const authToken = "{0}"; // TODO move to vault',
    "L0reFakeJsAuthT0ken",
)
_add(
    "mssql-connection-string",
    "Server=sql01;Database=lore;User Id=sa;Password={0};",
    "L0reFakeMssqlPw6",
)
_add(
    "azure-storage-key",
    "DefaultEndpointsProtocol=https;AccountName=lore;AccountKey={0};",
    _fake("AzureKey+", 86) + "==",
)
_add(
    "postgres-url",
    "DATABASE_URL=postgres://lore_app:{0}@db.internal:5432/lore works.",
    "L0reFakePgUrlPw55",
)
_add(
    "mysql-url",
    "Connect with mysql://root:{0}@127.0.0.1:3306/shop then migrate.",
    "L0reFakeMysqlPw21",
)
_add(
    "mongodb-srv-url",
    "Atlas string: mongodb+srv://admin:{0}@cluster0.ab1cd.mongodb.net/test",
    "L0reFakeMongoPw08",
)
_add(
    "redis-url",
    "Celery broker is redis://:{0}@cache.internal:6379/0 right now.",
    "L0reFakeRedisPw31",
)
_add(
    "amqp-url", "RabbitMQ at amqps://worker:{0}@mq.internal:5671/%2F is flaky.", "L0reFakeAmqpPw64"
)
_add("npm-token", "Publish with NPM_TOKEN set to {0} in CI.", "npm" + "_" + _fake("Npm", 36))
_add(
    "npmrc-auth-token",
    "My .npmrc line is //registry.npmjs.org/:_authToken={0}",
    "L0reFake-npmrc-legacy-0042",
)
_add("pypi-token", "twine upload -u __token__ -p {0}", "pypi" + "-" + _fake("PypiAgEI", 70))
_add("huggingface-token", "huggingface-cli login --token {0}", "hf" + "_" + _fake("Hf", 34))
_add(
    "sendgrid-key",
    "Mail goes out via SENDGRID_API_KEY {0} for now.",
    "SG" + "." + _fake("Sendgrid", 22) + "." + _fake("Sendgrid2", 43),
)
_add(
    "digitalocean-token", "doctl auth init used {0} as the token.", "dop" + "_v1_" + _hex("do", 64)
)
_add("telegram-bot-token", "The alert bot token is {0}.", "7123456789:AA" + _fake("Tg", 33))
_add(
    "curl-basic-credentials",
    "Try curl -u admin:{0} https://jenkins.internal/api/json",
    "L0reFakeCurlPw88",
)
_add("cli-password-flag", "Run ./manage.py createuser --password {0} --admin", "L0reFakeCliPw19")
_add("netrc", "My ~/.netrc: machine api.internal login deploy password {0}", "L0reFakeNetrcPw3")
_add(
    "hex-secret-in-prose",
    "The webhook signing secret is {0}, keep it out of git.",
    _hex("webhook-secret", 64),
)
_add(
    "base64-key-in-prose",
    "The encryption key: {0} (AES-256, base64).",
    _fake("B64Key+", 31) + "/" + _fake("K2", 11) + "=",
)
_add(
    "private-tag",
    "Remember this. <private>My bank PIN is {0}, and the safe code too.</private> Done.",
    "L0reFakePrivateNote",
)
_add(
    "private-tag-multiline-unclosed",
    "Notes follow.\n<PRIVATE>diary entry:\n{0}\nmore",
    "L0reFakeDiary",
)

SECRETS: list[tuple[str, str]] = [(name, line) for name, line, _ in _ENTRIES]
SECRET_VALUES: list[str] = [value for _, _, values in _ENTRIES for value in values]
VALUES_BY_NAME: dict[str, tuple[str, ...]] = {name: values for name, _, values in _ENTRIES}
