"""Secrets by kind (issue 25, "redaction that generalizes"): a corpus written from the issue's
list of kinds (passphrases with spaces, connection strings, command lines, password hashes, the
provider secrets still missed, credentials in prose) before any rule was tuned on it.

Every fifth case was then set aside, mechanically, in secrets_corpus_holdout.py: the rules were
tuned on CASES here and never on the hold-out, whose figure the README reports. NEAR_MISSES
are each kind's look-alikes (a version, a port, a commit hash, a uuid, a path,
`PASSWORD_MIN_LENGTH=12`, `LOG_LEVEL=debug`) that must survive untouched.

Values come from fixed hashes or are written out; none is a real credential.
"""

# ruff: noqa: E501  (a table of cases, one per line)

from __future__ import annotations

import base64
import hashlib

PASSPHRASE, CONNECTION, COMMAND_LINE = "passphrase", "connection-string", "command-line"
HASH, PROVIDER, PROSE = "password-hash", "provider", "prose"
P, K, L, H, V, R = PASSPHRASE, CONNECTION, COMMAND_LINE, HASH, PROVIDER, PROSE


def h(tag: str, n: int) -> str:
    """Hex digits from a fixed hash."""
    return (hashlib.sha256(b"lore-kinds-" + tag.encode()).hexdigest() * 4)[:n]


def b64(tag: str, n: int) -> str:
    raw = hashlib.sha256(b"lore-kinds-b64-" + tag.encode()).digest() * 4
    return base64.b64encode(raw).decode()[:n]


def b32(tag: str, n: int) -> str:
    raw = hashlib.sha256(b"lore-kinds-b32-" + tag.encode()).digest() * 4
    return "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[b % 32] for b in raw)[:n]


def salt(tag: str, n: int) -> str:
    """The crypt(3) alphabet: ./0-9A-Za-z."""
    raw = hashlib.sha256(b"lore-kinds-salt-" + tag.encode()).digest() * 4
    alphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(alphabet[b % 64] for b in raw)[:n]


Case = tuple[str, str, tuple[str, ...]]  # (kind, text, the secret values in it)


def case(into: list[Case], kind: str, template: str, *values: str) -> None:
    text = template.format(*values)
    assert values and all(value in text for value in values), template
    into.append((kind, text, values))


def leaks(text: str, values: tuple[str, ...], redacted: str) -> list[str]:
    """What of the secrets survives redaction: a value whole, or any word of a passphrase
    (four characters or more) that the rest of the text does not hold anyway."""
    found = []
    rest = text
    for value in values:
        rest = rest.replace(value, " ")
    for value in values:
        if value in redacted:
            found.append(value)
            continue
        found += [w for w in value.split() if len(w) >= 4 and w not in rest and w in redacted]
    return found


CASES: list[Case] = []


def c(kind: str, template: str, *values: str) -> None:
    case(CASES, kind, template, *values)


# --- passphrases with spaces ---
c(P, "password: {0}", "correct horse battery staple")
c(P, "the GPG passphrase is '{0}'", "violet anchors drift slowly")
c(P, "DB_PASSWORD={0}", "two words")  # unquoted env value with a space
c(P, '{{"password": "{0}"}}', "with spaces inside")
c(P, "Password: {0}", "Tangerine Sky Over Lisbon")
c(P, "passphrase: {0}", "rusty kettle singing at dawn")
c(P, "my wifi password is {0}", "blue lantern under the bridge")
c(P, "The vault passphrase was \"{0}\" until Monday.", "seven silent owls")
c(P, 'export KEYSTORE_PASSWORD="{0}"', "paper boats and rain")
c(P, "ADMIN_PASS='{0}'", "hollow pine ridge 9")
c(P, "key passphrase = {0}", "quiet engine north window")
c(P, "the password for the backup drive is: {0}", "lemon drizzle cake 2019")
c(P, "password \u2192 {0}", "gravel path to nowhere")
c(P, "pass phrase: {0}", "orbit velvet cactus drum")
c(P, "<password>{0}</password>", "glass river morning tea")
c(P, "mail_password: \"{0}\"", "frozen lake at noon")
c(P, "db.password={0}", "autumn maple syrup jar")
c(P, "PGPASSWORD='{0}' psql -h db", "cobalt moth fever")
c(P, "Use passphrase `{0}` for the ssh key.", "winter harbor echo")
c(P, "keystore password is {0} (don't share)", "bright copper kettles")
c(P, "mot de passe : {0}", "soleil rouge sur Paris")
c(P, "encryption passphrase \u2014 {0}", "maple cinder tower ninety")
# --- connection strings and URLs ---
c(K, "Driver={{ODBC Driver 18 for SQL Server}};Server=db01;Uid=app;Password={0};", "Blue Sky 42!")
c(K, "psql 'host=db.internal port=5432 user=app password={0} dbname=shop'", "Kx9!mQ2#vL")
c(K, "database_url: postgres://app:{0}@db.internal:6432/app?sslmode=require", "T9vW2qZk8M")
c(K, "  redis_url: redis://default:{0}@cache.prod:6380/0", "Rd5pLm2xQ9")
c(K, "webhook_url: https://hooks.example.com/in?token={0}&channel=ops", "aB3dE5fG7hJ9kL1mN2pQ")
c(K, "postgres://admin:{0}@db.example.com:5432/main", "p@ss:w/rd#1")
c(K, "amqp://guest:{0}@mq:5672/", "hash#tag:colon")
c(K, "mongodb://user:{0}@mongo1:27017,mongo2:27017/db?replicaSet=rs0", "m0ng0/p@ss")
c(K, "db.internal:5432:shop:app:{0}", "Pgpass-Secret-77")
c(K, "*:*:*:postgres:{0}", "SuperUser#Pass1")
c(K, "Server=tcp:lore.database.windows.net,1433;User ID=lore;Password={0};Encrypt=True;", "Azure Sql Pw 77")
c(K, "Data Source=db;Initial Catalog=shop;User Id=sa;Pwd={0};", "Long Password With Spaces")
c(K, "jdbc:postgresql://db:5432/shop?user=app&password={0}", "JdbcPw!2024")
c(K, "jdbc:sqlserver://db:1433;databaseName=shop;user=sa;password={0};", "SqlSrv#Pw88")
c(K, "dsn: \"mysql://svc:{0}@tcp(db:3306)/orders\"", "dsnPw5#tx")
c(K, "dbname=analytics host=warehouse user=bi password='{0}'", "quoted pass 12")
c(K, "smtp_url: smtp://mailer:{0}@smtp.example.com:587", "M4iler!Pw")
c(K, "  broker_url: amqps://svc:{0}@mq.internal:5671/vhost", "brok3r/Pw:x")
c(K, "Provider=SQLOLEDB;Data Source=srv;User ID=sa;Password={0};", "Ole Db Pw 9")
c(K, "ftp://backup:{0}@ftp.example.com:21/dumps", "ftpP@ss/2024")
c(K, "sqlalchemy.url = postgresql+psycopg2://app:{0}@db:5432/app", "alch3my'Pw")
c(K, "s3_endpoint: https://storage.example.com/b/f?X-Amz-Credential=AKIDEXAMPLE&secret={0}", "q8Wz2Lm4Rt6Yp0Xk")
# --- passwords on command lines ---
c(L, "psql --password {0} -h db", "PsqlFlag9x")
c(L, "./deploy.sh --password={0} --env prod", "DeployPw#7")
c(L, "ldapsearch -x -D cn=admin,dc=corp -w {0} -b dc=corp", "LdapBind77!")
c(L, "keytool -genkey -alias app -keystore app.jks -storepass {0} -keypass {1}", "St0rePass!", "K3yPass!")
c(L, "sqlplus scott/{0}@orcl", "Tiger2024x")
c(L, "exp system/{0}@PROD file=full.dmp", "Manager#99")
c(L, "rman target sys/{0}@cdb", "RmanSys!42")
c(L, "net use Z: \\\\fileserver\\share {0} /user:CORP\\alice", "Winter2024!")
c(L, "docker run -e POSTGRES_PASSWORD={0} -d postgres:16", "DockerPg#1")
c(L, "docker run --env MYSQL_ROOT_PASSWORD={0} mysql:8", "RootMy#88")
c(L, "docker run -e REDIS_PASSWORD={0} -p 6379:6379 redis", "RedisDock9")
c(L, "kubectl create secret generic api --from-literal=password={0}", "KubeLit#42")
c(L, "kubectl create secret generic tok --from-literal=api-token={0}", "tokVal93Xq")
c(L, "mongosh -u admin -p {0} --authenticationDatabase admin", "Mongo#Sh1")
c(L, "mongo --username root --password {0} mongo.internal", "MongoLegacy2")
c(L, "mongodump -u backup -p {0} --out /srv/dump", "DumpMongo5!")
c(L, "pg_dump --dbname=postgresql://bk:{0}@db/app > x.sql", "PgDumpUrl1")
c(L, "snowsql -a acct -u etl --password {0}", "Snow!Flake9")
c(L, "mysqladmin -uroot -p'{0}' status", "Adm1n Quoted")
c(L, "rabbitmqctl add_user svc {0}", "Rabbit#Pw3")
c(L, "az login --service-principal -u app-id -p {0} --tenant t1", "AzSpPw~77x")
c(L, "gh secret set DB_PASS --body {0}", "GhBodyPw#1")
c(L, "echo '{0}' | sudo -S apt update", "SudoPass42!")
c(L, "xfreerdp /u:admin /p:{0} /v:10.0.0.7", "RdpPass#9")
c(L, "svn checkout --username dev --password {0} https://svn/repo", "SvnPw#33")
c(L, "openvpn --askpass <(echo {0})", "VpnPw!9x")
c(L, "mssql-cli -S db -U sa -P {0}", "MsCli#44")
c(L, "pgcli postgres://u:{0}@localhost/db", "PgCliPw7")
# --- password hashes ---
c(H, "htpasswd file: admin:{0}", "$apr1$" + salt("apr1", 8) + "$" + salt("apr1b", 22))
c(H, "/etc/shadow: alice:{0}:19500:0:99999:7:::", "$y$j9T$" + salt("yes", 22) + "$" + salt("yes2", 43))
c(H, "stored hash {0}", "$argon2id$v=19$m=65536,t=3,p=4$" + b64("argon", 22).rstrip("=") + "$" + b64("argon2", 43).rstrip("="))
c(H, "bcrypt: {0}", "$2b$12$" + salt("bcrypt", 53))
c(H, "bob:{0}:18000::::::", "$5$" + salt("five", 16) + "$" + salt("five2", 43))
c(H, "old md5crypt {0}", "$1$" + salt("md5", 8) + "$" + salt("md5b", 22))
c(H, "user_hash = '{0}'", "$argon2i$v=19$m=4096,t=3,p=1$" + b64("a2i", 22).rstrip("=") + "$" + b64("a2ib", 43).rstrip("="))
c(H, "deploy:{0}", "$2y$10$" + salt("2y", 53))
c(H, "pbkdf2 hash: {0}", "pbkdf2_sha256$600000$" + salt("pbk", 22).replace(".", "x").replace("/", "y") + "$" + b64("pbk2", 43) + "=")
c(H, "scrypt hash {0}", "$scrypt$ln=16,r=8,p=1$" + b64("scr", 22).rstrip("=") + "$" + b64("scr2", 43).rstrip("="))
c(H, "nginx users file: admin:{0}", "$apr1$" + salt("ngx", 8) + "$" + salt("ngx2", 22))
c(H, "grub password_pbkdf2 root {0}", "grub.pbkdf2.sha512.10000." + h("grub", 128) + "." + h("grub2", 128))
c(H, "{0}", "$argon2d$v=19$m=1024,t=1,p=1$" + b64("a2d", 16).rstrip("=") + "$" + b64("a2d2", 32).rstrip("="))
c(H, "alice:{0}:19876:0:99999:7:::", "$6$rounds=5000$" + salt("sixr", 16) + "$" + salt("sixr2", 86))
c(H, "ldap userPassword: {0}", "{SSHA}" + b64("ssha", 32))
# --- provider secrets still missed ---
c(V, "Teams alerts: https://contoso.webhook.office.com/webhookb2/{0}", h("teams1", 8) + "-" + h("teams2", 4) + "-" + h("teams3", 4) + "-" + h("teams4", 4) + "-" + h("teams5", 12) + "@" + h("t6", 8) + "-" + h("t7", 4) + "-" + h("t8", 4) + "-" + h("t9", 4) + "-" + h("t10", 12) + "/IncomingWebhook/" + h("t11", 32) + "/" + h("t12", 8) + "-" + h("t13", 4) + "-" + h("t14", 4) + "-" + h("t15", 4) + "-" + h("t16", 12))
c(V, "Power Automate: https://prod-12.westus.logic.azure.com:443/workflows/" + h("wf", 32) + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={0}", b64("pa-sig", 43).replace("+", "-").replace("/", "_"))
c(V, "https://bucket.s3.amazonaws.com/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={0}", h("s3sig", 64))
c(V, "presigned: https://s3.eu-west-1.amazonaws.com/b/k?X-Amz-Signature={0}&X-Amz-Expires=900", h("s3sig2", 64))
c(V, "GCS signed URL ...&X-Goog-Signature={0}", h("gcssig", 256))
c(V, "2FA setup key: otpauth://hotp/Svc?secret={0}&counter=0", b32("otp2", 16))
c(V, "TOTP secret {0}", b32("otp3", 32))
c(V, "The 2FA secret is {0}", b32("otp4", 16).lower())
c(V, "ethereum private key: 0x{0}", h("eth", 64))
c(V, "signing key (hex): {0}", h("sign", 64))
c(V, "privkey = {0}", h("priv", 64))
c(V, "wallet private key {0}", h("wallet", 64))
c(V, "[Interface]\nPrivateKey = {0}\nListenPort = 51820", b64("wg1", 43) + "=")
c(V, "wg set wg0 private-key <(echo {0})", b64("wg2", 43) + "=")
c(V, "key body without header:\n{0}\n{1}\n{2}", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + b64("pem1", 32), b64("pem2", 64), b64("pem3", 64))
c(V, "the key starts with\nMIIEpAIBAAKCAQEA{0}\n{1}", b64("pem4", 48), b64("pem5", 64))
c(V, "b3BlbnNzaC1rZXktdjEAAAAA{0}\n{1}", b64("ossh1", 40), b64("ossh2", 70))
c(V, "kind: Secret\ndata:\n  api-key: {0}\n  tls.crt: LS0tLS1CRUdJTg==", base64.b64encode(b"k8s-api-key-7f3a9c").decode())
c(V, "stringData:\n  DB_PASSWORD: {0}", "K8sString#Pw1")
c(V, "data:\n  token: {0}", base64.b64encode(b"kube-token-Zx91Lq").decode())
c(V, "JENKINS_CREDS=deploy:{0}", "JenkCreds#41")
c(V, "NEXUS_CREDENTIALS=admin:{0}", "NexusCred!7")
c(V, "Recovery codes: {0} {1} {2}", "7f3k-9q2m", "x8b4-2n6p", "c1v5-m3z8")
c(V, "GitHub recovery codes:\n{0}\n{1}", "a1b2c-d3e4f", "g5h6i-j7k8l")
c(V, "backup codes for Google: {0} {1}", "4821 9937", "1052 6648")
c(V, "my wallet's recovery phrase is {0}", "legal winner thank year wave sausage worth useful legal winner thank yellow")
c(V, "mnemonic = \"{0}\"", "zoo zebra wrong wrist write world work word wood wolf wisdom wire")
c(V, "BIP39 words: {0}", "cactus brave orbit pilot velvet mango tunnel eager fossil humble radar sketch")
c(V, "AWS access key + secret: AKIA... / {0}", b64("awssec", 40).replace("+", "A").replace("=", "Q"))
# --- credentials in prose ---
c(R, "ssh in with password {0} and restart nginx", "Shh!Pw2024")
c(R, "login: admin / {0}", "AdminPw#9")
c(R, "user alice pass {0}", "AlicePass7!")
c(R, "the router's admin login is admin and the password {0}", "R0uterPw!")
c(R, "You can log in as deploy with {0} as the password.", "DeployPw2x!")
c(R, "use username ops and password {0}", "OpsPass#55")
c(R, "Jenkins: admin/{0}", "JenkAdm1n!")
c(R, "The Wi-Fi is Guest-5G, password {0}.", "CoffeeBeans22")
c(R, "creds are bob:{0}", "BobCreds#8")
c(R, "u: admin p: {0}", "PanelPw#66")
c(R, "account alice@example.com, pwd {0}", "Alice#Pwd1")
c(R, "I reset it; the new one is {0} for the root account password", "N3wRoot!Pw")
c(R, "log into the NAS as admin with {0}", "NasLogin#7")
c(R, "sign in with username: qa, password: {0}", "QaSign1n!")
c(R, "password for alice is {0}", "AlicePw#2025")
c(R, "ssh root@10.0.0.8 (pw {0})", "SshPw!808")

NEAR_MISSES: list[tuple[str, str]] = []


def n(kind: str, text: str) -> None:
    NEAR_MISSES.append((kind, text))


n(P, "PASSWORD_MIN_LENGTH=12\nLOG_LEVEL=debug\nPASSWORD_HASHER=argon2")
n(P, "The password must contain at least one digit and one symbol.")
n(P, "password: str = Field(min_length=12)")
n(P, "Reset your password from the settings page.")
n(P, "passphrase: ${GPG_PASSPHRASE}")
n(P, "the password is stored in 1Password under 'prod db'")
n(P, "password_hint: the name of our first dog")
n(P, "We rotated the passphrase yesterday and nobody noticed.")
n(P, "Password: required")
n(P, "password = None  # set later")
n(K, "host=db.internal port=5432 dbname=shop user=app sslmode=require")
n(K, "postgres://db.internal:5432/shop and https://example.com:8443/path?page=2&sort=asc")
n(K, "database_url: postgres://app@db.internal:5432/app")
n(K, "Server=db01;Database=lore;Trusted_Connection=True;")
n(K, "redis_url: redis://cache.prod:6379/0")
n(K, "db.internal:5432:shop:app:*")
n(K, "listen 127.0.0.1:8080; upstream at 10.0.0.5:3306")
n(K, "jdbc:postgresql://db:5432/shop?ssl=true&user=app")
n(K, "see https://github.com/owner/repo/commit/1c002dd4b536e7479fe34593e72e6c6c1819e53b")
n(K, "Data Source=db;Initial Catalog=shop;Integrated Security=SSPI;")
n(L, "ssh -p 2222 deploy@host")
n(L, "mysql -p\nmysql -u root -p shop")
n(L, "mkdir -p build/out && cp -p a b")
n(L, "psql --password -h db -U app")
n(L, "ldapsearch -x -W -D cn=admin,dc=corp")
n(L, "keytool -list -keystore app.jks -storepass:env STOREPASS")
n(L, "docker run -e LOG_LEVEL=debug -p 8080:80 nginx:1.25")
n(L, "kubectl create secret generic db --from-file=password=./pw.txt")
n(L, "mongosh -p 27017 is wrong; use --port 27017")
n(L, "sqlplus /nolog and sqlplus / as sysdba")
n(L, "net use Z: \\\\fileserver\\share /persistent:yes")
n(L, "docker run -e POSTGRES_PASSWORD_FILE=/run/secrets/pg postgres:16")
n(L, "tar -czvf out.tgz dir && grep -w error log.txt")
n(L, "pip install -r requirements.txt --user -p 3.11")
n(H, "The price is $6 and $2b plus $y for the tip.")
n(H, "Use $argon2id with m=65536 as the default hasher.")
n(H, "alice:x:1000:1000:Alice:/home/alice:/bin/bash")
n(H, "bob:*:19000:0:99999:7:::\ndaemon:!:19000::::::")
n(H, "echo $1 $2 and awk '{{print $6}}'")
n(H, "The htpasswd file lives at /etc/nginx/.htpasswd")
n(V, "Teams docs: https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/")
n(V, "https://bucket.s3.amazonaws.com/report.pdf?versionId=3HL4kqtJlcpXroDTDmJ")
n(V, "otpauth://totp/ACME:alice?issuer=ACME&period=30")
n(V, "The commit 1c002dd4b536e7479fe34593e72e6c6c1819e53b fixed the key rotation.")
n(V, "PublicKey = " + b64("wgpubonly", 43) + "=")
n(V, "sha256: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
n(V, "kind: ConfigMap\ndata:\n  LOG_LEVEL: debug\n  PORT: \"8080\"")
n(V, "BUILD_CREDS_FILE=/etc/ci/creds.json")
n(V, "request id 123e4567-e89b-12d3-a456-426614174000 and version 2.31.0")
n(V, "Recovery codes are shown once; store them somewhere safe.")
n(V, "The seed phrase has 12 or 24 words.")
n(V, "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----")
n(R, "ssh in with the deploy key, not a password")
n(R, "login: admin / see the vault entry")
n(R, "user alice pass the test now")
n(R, "log in as admin with your SSO account")
n(R, "The Wi-Fi password is on the fridge.")
n(R, "Credentials: see /etc/app/credentials.yaml")
n(R, "port 5432, version 16.2, path /var/lib/postgresql")
n(R, "Jenkins: admin/settings page")
n(R, "the tests pass test_redact2 now; we pass user_id2 to it")
n(R, "git log --author=root/a1b2c3 and root/src/main2.py")
n(P, "Password: Enter your password below\npassword: hashed with bcrypt before storage")
