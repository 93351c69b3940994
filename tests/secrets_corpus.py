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
    value = ("L0REFAKE" + tag + "7Q9Z2B4W8R1Y6U3P5S0D" * 4)[:length]
    assert len(value) == length
    return value


def _hex(tag: str, length: int) -> str:
    return (hashlib.sha256(b"lore-fake-" + tag.encode()).hexdigest() * 3)[:length]


_PEM_BODY = {
    kind: ("MII" + _fake(f"Pem{kind.replace(' ', '')}", 61), _fake(f"PemTail{kind[:2]}", 40))
    for kind in ("RSA", "EC", "OPENSSH", "")
}


def _pem(kind: str) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    head, tail = _PEM_BODY[kind]
    return f"-----BEGIN {label}-----\n{head}\n{tail}==\n-----END {label}-----"


_JWT_HEADER = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"  # {"alg":"HS256","typ":"JWT"}
_JWT_PAYLOAD = base64.urlsafe_b64encode(b'{"sub":"L0reFakeJwtUser","admin":true}').decode().rstrip("=")
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
_add("pem-openssh-private-key", "My ~/.ssh/id_ed25519 is\n" + _pem("OPENSSH"), *_PEM_BODY["OPENSSH"])
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
_add("amqp-url", "RabbitMQ at amqps://worker:{0}@mq.internal:5671/%2F is flaky.", "L0reFakeAmqpPw64")
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
_add("digitalocean-token", "doctl auth init used {0} as the token.", "dop" + "_v1_" + _hex("do", 64))
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


# --- formats added for issue 14 ---------------------------------------------------------------


def _letters(tag: str, length: int) -> str:
    """Lower-case letters only, from a fixed hash: the 'all-lowercase random string' shape."""
    digest = hashlib.sha256(b"lore-letters-" + tag.encode()).digest() * 4
    return "".join("bcdfghjklmnpqrstvwxz"[b % 20] for b in digest)[:length]


def _lower_alnum(tag: str, length: int) -> str:
    """Lower-case letters and digits, from a fixed hash (Django session ids, base32 PATs)."""
    digest = hashlib.sha256(b"lore-alnum-" + tag.encode()).digest() * 4
    return "".join("abcdefghijklmnopqrstuvwxyz234567"[b % 32] for b in digest)[:length]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Env files: any secret-ish name, even a weak one (KEY, PAT, DSN), holds a literal.
_add("env-openai-key", "OPENAI_KEY={0}\nOPENAI_ORG=lore", _fake("OpenaiEnv", 40))
_add("env-stripe-key", "export STRIPE_KEY={0}", _fake("StripeEnv", 32))
_add("env-db-pass", "DB_HOST=db.internal\nDB_PASS={0}\nDB_PORT=5432", "L0reFake-DbPass%9&x")
_add("env-pat", "AZURE_DEVOPS_PAT={0}", _lower_alnum("ado-pat", 52))
_add("env-dsn", "export WAREHOUSE_DSN={0}", "L0reFakeDsn;Uid=etl;Pwd=77")
_add("env-quoted-token", 'SLACK_SIGNING_TOKEN="{0}"', _fake("EnvQuoted", 32))
_add("pw-colon", "creds for the staging box, pw: {0}", "L0reFake_Pw4411")
_add("prose-password-for", "FYI the password for prod is {0}, don't lose it.", "L0reFake+Prod!77")
_add("prose-passphrase", "The passphrase of the backup key was {0} until today.", "L0reFake-Pass-Phrase1")
_add("lowercase-random-token", "api_token = {0}", _letters("api-token", 24))
_add("lowercase-random-password", "password: {0}", _letters("password-colon", 14))
_add(
    "url-password-with-at",
    "Connect with postgres://admin:{0}@db.internal:5432/app then migrate.",
    "p@ss@L0reFake@word",
)
_add("url-password-with-slash", "mysql://root:{0}@db/shop is the old DSN.", "ab/cd1234L0reFake")
_add("git-credentials-url", "~/.git-credentials: https://lore:{0}@git.internal", "L0reFakeGitCred55")
_add("jdbc-oracle", "jdbc:oracle:thin:scott/{0}@db:1521:orcl", "L0reFakeTiger81")
_add("odbc-connection-string", "Driver={{ODBC Driver 18}};Server=db;Uid=sa;Pwd={0};", "L0reFakeOdbcPw2")
_add("databricks-token", "DATABRICKS_HOST=x; use {0} for the workspace.", "dapi" + _hex("databricks", 32))
_add("twilio-api-key", "Twilio key sid {0} for SMS.", "SK" + _hex("twilio", 32))
_add(
    "discord-webhook",
    "Post to https://discord.com/api/webhooks/123456789012345678/{0} for alerts.",
    _fake("DiscordHook", 68),
)
_add(
    "discord-bot-token",
    "client.run('{0}')",
    "M" + _fake("DiscordBot", 25) + "." + _fake("Ts", 6) + "." + _fake("DiscordHmac", 38),
)
_add(
    "google-oauth-client-secret",
    '"client_id": "x.apps", "client_secret": "{0}"',
    "GOCSPX-" + _fake("Gocspx", 28),
)
_add("google-oauth-access-token", "gcloud printed {0} as the access token.", "ya29." + _fake("Ya29", 60))
_add("google-refresh-token", "The refresh token {0} never expires.", "1//0" + _fake("GRefresh", 60))
_add("huggingface-token-bare", "Pull the gated model with {0} please.", "hf" + "_" + _fake("HfBare", 34))
_add("huggingface-org-token", "The org uses {0} for inference.", "api" + "_org_" + _fake("HfOrg", 34))
_add("shopify-token", "Shopify admin API: {0}", "shpat" + "_" + _hex("shopify", 32))
_add("linear-key", "Linear wants {0} in the header.", "lin" + "_api_" + _fake("Linear", 40))
_add("atlassian-token", "Jira accepts {0} with my email.", "ATATT3x" + _fake("Atlassian", 120) + "=A1B2C3D4")
_add("bitbucket-app-password", "Bitbucket app password {0} for CI.", "ATBB" + _fake("Bitbucket", 32))
_add("vault-token", "vault login {0}", "hvs." + _fake("Vault", 90))
_add("vault-batch-token", "The batch token {0} is short lived.", "hvb." + _fake("VaultBatch", 120))
_add(
    "tailscale-key",
    "Join with tailscale up --authkey={0}",
    "tskey-auth-k" + _fake("TsNode", 10) + "CNTRL-" + _fake("Tailscale", 30),
)
_add("age-secret-key", "# created: 2026-01-01\n{0}", "AGE-SECRET-KEY-1" + _upper("AGE", 58))
_add(
    "putty-private-key",
    "The .ppk file:\nPuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: lore\n"
    "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAI\nPrivate-Lines: 1\n{0}\nPrivate-MAC: {1}\nend",
    _fake("PuttyPriv", 44),
    _hex("putty-mac", 64),
)
_add(
    "azure-sas",
    "Download https://lore.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r"
    "&se=2026-12-01T00:00:00Z&sig={0} before Friday.",
    _fake("AzureSas", 40) + "%3D",
)
_add(
    "sentry-dsn",
    "SENTRY_DSN=https://{0}@o4507.ingest.sentry.io/4508",
    _hex("sentry-dsn", 32),
)
_add(
    "docker-config-auth",
    'In ~/.docker/config.json: {{"auths": {{"ghcr.io": {{"auth": "{0}"}}}}}}',
    _b64("lore:L0reFakeDockerPw42"),
)
_add("npmrc-basic-auth", "//registry.internal/:_auth={0}", _b64("ci:L0reFakeNpmAuth9"))
_add("mysql-p-flag", "mysql -h db -u root -p{0} shop < dump.sql", "L0reFakeMysqlCli9")
_add("sshpass", "sshpass -p {0} ssh deploy@web1 uptime", "L0reFakeSshpass4")
_add("docker-login", "docker login -u lore -p {0} registry.internal", "L0reFakeDockerLogin1")
_add("redis-cli-auth", "redis-cli -h cache -a {0} ping", "L0reFakeRedisCli7")
_add("redis-requirepass", "redis.conf has\nrequirepass {0}\nmaxmemory 1gb", "L0reFakeRequirePass3")
_add("sqlcmd-password", "sqlcmd -S db -U sa -P {0} -Q 'select 1'", "L0reFakeSqlcmd42")
_add("openssl-passout", "openssl pkcs12 -export -passout pass:{0} -out x.p12", "L0reFakeP12Pass6")
_add("smbclient-password", "smbclient //nas/share -U lore%{0}", "L0reFakeSmbPw11")
_add("htpasswd-batch", "htpasswd -bc .htpasswd admin {0}", "L0reFakeHtpasswd5")
_add("curl-user-flag", "curl --user deploy:{0} https://ci.internal/api", "L0reFakeCurlUser2")
_add("session-cookie", "Cookie: sessionid={0}; csrftoken=abc", _lower_alnum("django-session", 32))
_add(
    "yaml-password-block",
    "db:\n  password: |\n    {0}\n    {1}\n  host: db.internal",
    "L0reFakeYamlBlock#1",
    "L0reFakeYamlBlock#2",
)
_add("xml-password", "<connection><password>{0}</password></connection>", "L0reFakeXmlPw!3")
_add("dotnet-appsettings", '<add key="DbPassword" value="{0}" />', "L0reFakeDotnetPw8")
_add("x-api-key-header", "curl -H 'X-API-Key: {0}' https://api.internal", _fake("XApiKey", 32))
_add("ssws-authorization", "Okta wants Authorization: SSWS {0} on admin calls.", "00" + _fake("Ssws", 40))
_add(
    "url-query-access-token", "GET https://api.internal/v1/me?access_token={0}&page=2", _fake("QueryTok", 30)
)
_add("oauth-token-response", "token_type=bearer&access_token={0}&expires_in=3600", _fake("OauthResp", 30))
_add(
    "kubectl-from-literal", "kubectl create secret generic db --from-literal=password={0}", "L0reFakeKubePw7"
)
_add("kubeconfig-client-key", "users:\n- user:\n    client-key-data: {0}", "LS0t" + _fake("KubeKey", 80))
_add("wireguard-private-key", "[Interface]\nPrivateKey = {0}\nAddress = 10.0.0.2/32", _fake("Wg+", 43) + "=")
_add("wifi-psk", 'network={{\n  ssid="lore"\n  psk="{0}"\n}}', "L0reFakeWifi2024x")
_add("spring-properties", "spring.datasource.password={0}", "L0reFakeSpringPw4")
_add("terraform-tfvars", 'db_password = "{0}"', "L0reFakeTfvars-91")
_add("otpauth-secret", "otpauth://totp/Lore:me?secret={0}&issuer=Lore", _upper("TOTP", 32))
_add("gitlab-runner-token", "gitlab-runner register --token {0}", "glrt" + "-" + _fake("Runner", 24))
_add("gitlab-deploy-token", "Deploy token: {0}", "gldt" + "-" + _fake("Gldt", 24))
_add("dockerhub-token", "Docker Hub PAT {0} for pulls.", "dckr" + "_pat_" + _fake("Dckr", 27))
_add("rubygems-token", "gem push with {0}", "rubygems" + "_" + _hex("rubygems", 48))
_add("nuget-key", "dotnet nuget push -k {0}", "oy2" + _hex("nuget", 43))
_add("clojars-token", "Clojars deploy token {0}", "CLOJARS" + "_" + _hex("clojars", 60))
_add("jfrog-key", "Artifactory API key {0}", "AKCp" + _fake("Jfrog", 69))
_add(
    "grafana-service-token",
    "Grafana SA token {0}",
    "glsa" + "_" + _fake("Grafana", 32) + "_" + _hex("gsa", 8),
)
_add("newrelic-key", "New Relic user key {0}", "NRAK" + "-" + _upper("NEWRELIC", 27))
_add("doppler-token", "doppler configure set token {0}", "dp.pt." + _fake("Doppler", 43))
_add("pulumi-token", "Pulumi access token {0}", "pul" + "-" + _hex("pulumi", 40))
_add("planetscale-token", "PlanetScale service token {0}", "pscale" + "_tkn_" + _fake("Pscale", 43))
_add("supabase-token", "Supabase CLI token {0}", "sbp" + "_" + _hex("supabase", 40))
_add("terraform-cloud-token", "TFC token {0}", _fake("TfOrg", 14) + ".atlasv1." + _fake("TfCloud", 67))
_add("notion-token", "Notion integration {0}", "ntn" + "_12345678901" + _fake("Notion", 35))
_add("figma-token", "Figma PAT {0}", "figd" + "_" + _fake("Figma", 40))
_add("postman-key", "Postman API key {0}", "PMAK" + "-" + _hex("pm1", 24) + "-" + _hex("pm2", 34))
_add("replicate-token", "Replicate token {0}", "r8" + "_" + _fake("Replicate", 37))
_add("groq-key", "Groq key {0}", "gsk" + "_" + _fake("Groq", 52))
_add("xai-key", "xAI key {0}", "xai" + "-" + _fake("Xai", 80))
_add("perplexity-key", "Perplexity key {0}", "pplx" + "-" + _fake("Pplx", 48))
_add("mailgun-key", "Mailgun private key {0}", "key" + "-" + _hex("mailgun", 32))
_add("mailchimp-key", "Mailchimp API key {0}", _hex("mailchimp", 32) + "-us21")
_add("sentry-auth-token", "sentry-cli uses {0}", "sntryu" + "_" + _hex("sentry-auth", 64))
_add("dynatrace-token", "Dynatrace token {0}", "dt0c01." + _upper("DTA", 24) + "." + _upper("DTB", 64))
_add("square-token", "Square token {0}", "sq0atp" + "-" + _fake("Square", 22))
_add("contentful-token", "Contentful CMA token {0}", "CFPAT" + "-" + _fake("Contentful", 43))
_add("typeform-token", "Typeform token {0}", "tfp" + "_" + _fake("Typeform", 59))
_add("prefect-key", "Prefect key {0}", "pnu" + "_" + _fake("Prefect", 36))
_add("heroku-token", "Heroku token {0}", "HRKU" + "-" + _fake("Heroku", 60))
_add("fly-token", "Fly token {0}", "fo1" + "_" + _fake("Fly", 43))
_add("scalingo-token", "Scalingo token {0}", "tk-us" + "-" + _fake("Scalingo", 48))
_add("alibaba-key", "Alibaba AccessKey ID {0}", "LTAI" + _fake("Alibaba", 20))
_add(
    "azure-ad-client-secret",
    "The app registration secret is {0} (expires 2027).",
    "L0r8Q~" + _fake("AzAd", 34),
)
_add(
    "firebase-server-key",
    "FCM legacy server key {0}",
    "AAAA" + _fake("Fcm", 7) + ":APA91b" + _fake("Fcm2", 134),
)
_add("cloudflare-origin-key", "Origin CA key {0}", "v1.0-" + _hex("cf1", 24) + "-" + _hex("cf2", 146))
_add(
    "braintree-token",
    "Braintree {0}",
    "access_token$production$" + _lower_alnum("bt", 16) + "$" + _hex("bt2", 32),
)
_add("mapbox-secret-token", "Mapbox secret {0}", "sk.eyJ1" + _fake("Mapbox", 60) + "." + _fake("Mapbox2", 22))
_add("1password-service-token", "OP_SERVICE_ACCOUNT_TOKEN is {0}", "ops" + "_eyJ" + _fake("Ops", 80))
_add(
    "1password-secret-key",
    "My 1Password secret key: {0}",
    "A3-"
    + _upper("OPA", 6)
    + "-"
    + _upper("OPB", 11)
    + "-"
    + _upper("OPC", 5)
    + "-"
    + _upper("OPD", 5)
    + "-"
    + _upper("OPE", 5),
)
_add("bcrypt-hash", "htpasswd line admin:{0}", "$2y$10$" + _fake("Bcrypt", 53))
_add(
    "sha512crypt-hash",
    "/etc/shadow: lore:{0}:19000:0:99999:7:::",
    "$6$" + _fake("Salt", 16) + "$" + _fake("Sha512", 86),
)
_add("hex-token-after-keyword", "The deploy token: {0}", _hex("deploy-token", 40))
_add(
    "pgp-private-key",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{0}\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----",
    "lQOYBF" + _fake("Pgp", 60),
)

# An unclosed <private> tag hides everything after it, so it goes last: tests that join the
# corpus into one text would otherwise prove nothing about the formats that follow it.
_ENTRIES.sort(key=lambda entry: "unclosed" in entry[0])
SECRETS: list[tuple[str, str]] = [(name, line) for name, line, _ in _ENTRIES]
SECRET_VALUES: list[str] = [value for _, _, values in _ENTRIES for value in values]
VALUES_BY_NAME: dict[str, tuple[str, ...]] = {name: values for name, _, values in _ENTRIES}

# Near misses: text shaped like the formats above that holds no secret and must survive
# untouched (tests/safety/test_redact.py), each named after the format it imitates.
NEAR_MISSES: list[tuple[str, str]] = [
    ("env-lines", "OPENAI_KEY=$OPENAI_KEY and STRIPE_KEY=${STRIPE_KEY} come from the vault."),
    ("env-lines", "SORT_KEY=name\nDB_PASS=\nGITHUB_PAT=<your token>\nSENTRY_DSN="),
    ("env-lines", "DB_PORT=5432\nTOKEN_TTL=3600\nPASSWORD_MIN_LENGTH=12"),
    ("assignments", "token_count = 12 and max_tokens = 1024"),
    ("assignments", "password_policy: strict\nsecret_name: prod-db-creds\ntoken_url: https://x.io/t"),
    ("assignments", "token_type=bearer&expires_in=3600"),
    ("assignments", "session_id = 42; session_id: 123e4567-e89b-12d3-a456-426614174000"),
    ("assignments", "sessionid=None"),
    ("assignments", 'key = "name"; sort_key=lambda r: r.score; primary_key=True'),
    ("assignments", "cache_key = f'{user}:{item}'"),
    ("assignments", 'auth: none\n"auth": true\n"auth": "oauth2"'),
    ("assignments", "psk: optional"),
    ("pw", "pw: str\npw = getpass()\npw = pw.strip()"),
    ("lowercase-after-keyword", "token: expired\nthe token: invalid\npassword = password"),
    ("lowercase-after-keyword", "token = tokenizer.encode(text)"),
    ("prose", "The password policy requires 12 characters."),
    ("prose", "the password for prod is stored in Vault"),
    ("prose", "The token was rotated yesterday and the secret is out."),
    ("prose", "The password is 12 characters long; the pin is 4 digits."),
    ("prose", "the key is sorted by name"),
    ("url-credentials", "https://api.example.com:8443/v1/items?page=2 and https://user@host.example/path"),
    ("url-credentials", "npm view https://registry.example:443/@scope/pkg"),
    ("url-credentials", "Read https://medium.com/@lore/post and git@github.com:owner/repo.git"),
    ("twilio", "SKU 4411, the SK hynix chip and SK-12 pumps; SKIP_TESTS=1"),
    ("huggingface", "from huggingface_hub import hf_hub_download; hf_hub_download(repo_id='x')"),
    ("azure-sas", "sig = inspect.signature(fn); def f(sig=None): pass; ?sig=abc"),
    ("databricks", "dapi is short for the Databricks API; dapi_client = Client()"),
    ("google", "The ya29 bucket and the GOCSPX prefix are documented."),
    ("tailscale", "See tskey-rotation in the runbook."),
    ("age", "An age key starts with AGE-SECRET-KEY-1 and is 74 characters long."),
    ("putty", "PuTTY-User-Key-File-3 is the format; Private-Lines: 14 says how long."),
    ("atlassian", "ATATT tokens and lin_api_ keys and shpat_ tokens and hvs. tokens exist."),
    ("discord", "Docs at https://discord.com/developers/docs/resources/webhook"),
    ("mysql", "mysql -u root -p shop\nmkdir -p build\nmysql -h db -P 3306 -u app -p"),
    ("sshpass", "sshpass -f ~/.sshpw ssh host\nsshpass -e ssh -p 2222 host"),
    ("docker-login", "echo $PW | docker login -u lore --password-stdin registry.internal"),
    ("redis", "redis-cli -h cache ping"),
    ("openssl", "openssl pkcs12 -passin env:P12_PASS -passout file:pw.txt"),
    ("htpasswd", "htpasswd -c .htpasswd admin"),
    ("smbclient", "smbclient -L nas -U lore"),
    ("curl", "curl -u admin https://jenkins.internal/ and docker run -u 1000:1000 img"),
    ("yaml-block", "db:\n  password: |\n  host: db.internal\n  description: >\n    a folded text"),
    ("xml", "<password></password><passwordPolicy>strict</passwordPolicy>"),
    ("xml", "<token>{{ page.token }}</token>"),
    ("dotnet", '<add key="Theme" value="dark" />'),
    ("cli-flags", "git push --force and pytest --token-limit 5"),
    ("docker-auth", '"credsStore": "desktop", "auth": "basic"'),
    ("jwt-like", 'The header eyJ is base64 for {" and foo.bar.baz is a path.'),
    ("session-cookie", "Cookie: theme=dark; lang=en"),
]


# --- every provider rule, bare (issue 26) -----------------------------------------------------
# The sentences above put most tokens after a key word, where the generic `name = value` rules
# would catch them anyway. Here each provider rule gets a value written bare in neutral prose,
# and its marker must name its own kind: delete a rule and a test fails.
# (kind, the token as written, the part of it that must not survive)
PROVIDER_TOKENS: list[tuple[str, str, str]] = []


def _bare(kind: str, token: str, secret: str | None = None) -> None:
    PROVIDER_TOKENS.append((kind, token, token if secret is None else secret))


def _base32(tag: str, length: int) -> str:
    digest = hashlib.sha256(b"lore-base32-" + tag.encode()).digest() * 4
    return "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[b % 32] for b in digest)[:length]


_bare("anthropic-key", VALUES_BY_NAME["anthropic-key"][0])
_bare("openai-key", VALUES_BY_NAME["openai-legacy-key"][0])
_bare("openai-key", VALUES_BY_NAME["openai-project-key"][0])
_bare("aws-key", VALUES_BY_NAME["aws-access-key-id"][0])
_bare("aws-key", VALUES_BY_NAME["aws-session-key-id"][0])
_bare("github-token", VALUES_BY_NAME["github-classic-pat"][0])
_bare("github-token", VALUES_BY_NAME["github-oauth-token"][0])
_bare("github-token", VALUES_BY_NAME["github-user-token"][0])
_bare("github-token", VALUES_BY_NAME["github-app-token"][0])
_bare("github-token", VALUES_BY_NAME["github-refresh-token"][0])
_bare("github-token", VALUES_BY_NAME["github-fine-grained-pat"][0])
_bare("gitlab-token", VALUES_BY_NAME["gitlab-pat"][0])
_bare("slack-token", VALUES_BY_NAME["slack-bot-token"][0])
_bare("slack-token", VALUES_BY_NAME["slack-user-token"][0])
_bare("slack-token", VALUES_BY_NAME["slack-app-token"][0])
_bare("google-api-key", VALUES_BY_NAME["google-api-key"][0])
_bare("stripe-key", VALUES_BY_NAME["stripe-secret-key"][0])
_bare("stripe-key", VALUES_BY_NAME["stripe-restricted-key"][0])
_bare("stripe-webhook-secret", VALUES_BY_NAME["stripe-webhook-secret"][0])
_bare("npm-token", VALUES_BY_NAME["npm-token"][0])
_bare("pypi-token", VALUES_BY_NAME["pypi-token"][0])
_bare("huggingface-token", VALUES_BY_NAME["huggingface-token"][0])
_bare("sendgrid-key", VALUES_BY_NAME["sendgrid-key"][0])
_bare("digitalocean-token", VALUES_BY_NAME["digitalocean-token"][0])
_bare("telegram-bot-token", VALUES_BY_NAME["telegram-bot-token"][0])
_bare("databricks-token", VALUES_BY_NAME["databricks-token"][0])
_bare("twilio-key", VALUES_BY_NAME["twilio-api-key"][0])
_bare("discord-bot-token", VALUES_BY_NAME["discord-bot-token"][0])
_bare("google-oauth-secret", VALUES_BY_NAME["google-oauth-client-secret"][0])
_bare("google-oauth-token", VALUES_BY_NAME["google-oauth-access-token"][0])
_bare("google-refresh-token", VALUES_BY_NAME["google-refresh-token"][0])
_bare("huggingface-token", VALUES_BY_NAME["huggingface-token-bare"][0])
_bare("huggingface-token", VALUES_BY_NAME["huggingface-org-token"][0])
_bare("shopify-token", VALUES_BY_NAME["shopify-token"][0])
_bare("linear-key", VALUES_BY_NAME["linear-key"][0])
_bare("atlassian-token", VALUES_BY_NAME["atlassian-token"][0])
_bare("atlassian-token", VALUES_BY_NAME["bitbucket-app-password"][0])
_bare("vault-token", VALUES_BY_NAME["vault-token"][0])
_bare("vault-token", VALUES_BY_NAME["vault-batch-token"][0])
_bare("tailscale-key", VALUES_BY_NAME["tailscale-key"][0])
_bare("age-secret-key", VALUES_BY_NAME["age-secret-key"][0])
_bare("gitlab-token", VALUES_BY_NAME["gitlab-runner-token"][0])
_bare("gitlab-token", VALUES_BY_NAME["gitlab-deploy-token"][0])
_bare("dockerhub-token", VALUES_BY_NAME["dockerhub-token"][0])
_bare("rubygems-token", VALUES_BY_NAME["rubygems-token"][0])
_bare("nuget-key", VALUES_BY_NAME["nuget-key"][0])
_bare("clojars-token", VALUES_BY_NAME["clojars-token"][0])
_bare("jfrog-key", VALUES_BY_NAME["jfrog-key"][0])
_bare("grafana-token", VALUES_BY_NAME["grafana-service-token"][0])
_bare("newrelic-key", VALUES_BY_NAME["newrelic-key"][0])
_bare("doppler-token", VALUES_BY_NAME["doppler-token"][0])
_bare("pulumi-token", VALUES_BY_NAME["pulumi-token"][0])
_bare("planetscale-token", VALUES_BY_NAME["planetscale-token"][0])
_bare("supabase-token", VALUES_BY_NAME["supabase-token"][0])
_bare("terraform-token", VALUES_BY_NAME["terraform-cloud-token"][0])
_bare("notion-token", VALUES_BY_NAME["notion-token"][0])
_bare("figma-token", VALUES_BY_NAME["figma-token"][0])
_bare("postman-key", VALUES_BY_NAME["postman-key"][0])
_bare("replicate-token", VALUES_BY_NAME["replicate-token"][0])
_bare("groq-key", VALUES_BY_NAME["groq-key"][0])
_bare("xai-key", VALUES_BY_NAME["xai-key"][0])
_bare("perplexity-key", VALUES_BY_NAME["perplexity-key"][0])
_bare("mailgun-key", VALUES_BY_NAME["mailgun-key"][0])
_bare("mailchimp-key", VALUES_BY_NAME["mailchimp-key"][0])
_bare("sentry-token", VALUES_BY_NAME["sentry-auth-token"][0])
_bare("dynatrace-token", VALUES_BY_NAME["dynatrace-token"][0])
_bare("square-token", VALUES_BY_NAME["square-token"][0])
_bare("contentful-token", VALUES_BY_NAME["contentful-token"][0])
_bare("typeform-token", VALUES_BY_NAME["typeform-token"][0])
_bare("prefect-key", VALUES_BY_NAME["prefect-key"][0])
_bare("heroku-token", VALUES_BY_NAME["heroku-token"][0])
_bare("fly-token", VALUES_BY_NAME["fly-token"][0])
_bare("scalingo-token", VALUES_BY_NAME["scalingo-token"][0])
_bare("alibaba-key", VALUES_BY_NAME["alibaba-key"][0])
_bare("azure-client-secret", VALUES_BY_NAME["azure-ad-client-secret"][0])
_bare("firebase-key", VALUES_BY_NAME["firebase-server-key"][0])
_bare("cloudflare-origin-key", VALUES_BY_NAME["cloudflare-origin-key"][0])
_bare("braintree-token", VALUES_BY_NAME["braintree-token"][0])
_bare("mapbox-token", VALUES_BY_NAME["mapbox-secret-token"][0])
_bare("1password-token", VALUES_BY_NAME["1password-service-token"][0])
_bare("1password-secret-key", VALUES_BY_NAME["1password-secret-key"][0])
_bare("password-hash", VALUES_BY_NAME["bcrypt-hash"][0])
_bare("password-hash", VALUES_BY_NAME["sha512crypt-hash"][0])
_SLACK_HOOK = _fake("BareSlackHook", 24)
_bare("slack-webhook", "https://hooks.slack.com/services/T0LORE1/B0LORE2/" + _SLACK_HOOK, _SLACK_HOOK)
_DISCORD_HOOK = _fake("BareDiscordHook", 68)
_bare("discord-webhook", "https://discord.com/api/webhooks/1234567890/" + _DISCORD_HOOK, _DISCORD_HOOK)
_bare("gitlab-token", "GR1348941" + _fake("GlRunnerReg", 20))
_bare("buildkite-token", "bkua" + "_" + _hex("buildkite", 40))
_bare("grafana-token", "glc" + "_" + _fake("GrafanaCloud", 40) + "==")
_bare("notion-token", "secret" + "_" + _fake("NotionLegacy", 43))
_bare("airtable-token", "pat" + _fake("Airtab", 14) + "." + _hex("airtable", 64))
_bare("jwt", _JWT_HEADER + "." + _JWT_PAYLOAD + "." + _JWT_SIGNATURE, _JWT_PAYLOAD)
_bare("password-hash", "$apr1$" + _fake("Apr", 8) + "$" + _fake("AprHash", 22))
_bare("password-hash", "pbkdf2_sha256$600000$" + _fake("DjSalt", 22) + "$" + _fake("DjHash", 43) + "=")
_bare("password-hash", "{SSHA}" + _fake("Ssha", 32))
_bare("password-hash", "grub.pbkdf2.sha512.10000." + _hex("grub1", 128) + "." + _hex("grub2", 128))
_bare("password-hash", "*" + _hex("mysql-native", 40).upper())
_TEAMS = _hex("teams", 32)
_bare(
    "teams-webhook",
    "https://lore.webhook.office.com/webhookb2/" + _hex("tm1", 8) + "-" + _hex("tm2", 4) + "@"
    + _hex("tm3", 8) + "/IncomingWebhook/" + _TEAMS + "/" + _hex("tm4", 8),
    _TEAMS,
)
_S3_SIGNATURE = _hex("s3-signature", 64)
_bare(
    "url-signature",
    "https://b.s3.amazonaws.com/k?X-Amz-Expires=900&X-Amz-Signature=" + _S3_SIGNATURE,
    _S3_SIGNATURE,
)
_OTP = _base32("otp-bare", 32)
_bare("otp-secret", "otpauth://totp/Lore:me?issuer=Lore&secret=" + _OTP, _OTP)
_PEM_BARE = _fake("PemBare", 40)
_bare("private-key", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _PEM_BARE + "\n" + _fake("PemBare2", 64), _PEM_BARE)
