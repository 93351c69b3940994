"""A second hold-out: 40 realistic secrets and 20 near misses written on 2026-11-25 by someone who had not
read the redaction rules, measured once and never tuned on."""

# ruff: noqa: E501

from __future__ import annotations

from tests.safety.secrets_corpus_kinds import Case, H, K, L, P, R, V, b32, b64, case, h, salt

HELD_OUT_2: list[Case] = []
NEAR_MISSES_2: list[tuple[str, str]] = []  # (kind, text) that must survive untouched


def c(kind: str, template: str, *values: str) -> None:
    case(HELD_OUT_2, kind, template, *values)


# passphrases with spaces after a password-like key or phrase
c(P, "grafana:\n  admin_password: lantern orchard velvet ninety\n  admin_user: ops", "lantern orchard velvet ninety")
c(P, 'export GPG_PASSPHRASE="quiet rivers carry old maps"', "quiet rivers carry old maps")
c(P, "APP_ENV=staging\nDB_PASSWORD=marigold tuesday\nDB_HOST=10.2.0.7", "marigold tuesday")
c(P, '{{"username": "svc_report", "password": "Seven Blue Herons 1988", "realm": "corp"}}', "Seven Blue Herons 1988")
c(P, "<smtp>\n  <user>alerts@example.org</user>\n  <password>fern gully nineteen rocks</password>\n</smtp>", "fern gully nineteen rocks")

# connection strings and URLs
c(K, "Server=tcp:sql-prod-02,1433;Database=Billing;User Id=billing_app;Password=Orange Tram 77!;Encrypt=True;", "Orange Tram 77!")
c(K, "host=db.internal port=5432 user=etl password={} dbname=warehouse sslmode=require", "Kp9#mQ2vXw")
c(K, "inventory:\n  database_url: postgres://inventory:{}@10.0.4.12:5432/inventory", salt("ho2-inv", 20))
c(K, "alerts:\n  webhook_endpoint: https://hooks.example.net/ingest?source=ci&token={}", h("ho2-hooktok", 40))
c(K, 'DATABASE_URL="mysql://root:{}@mysql.staging.local:3306/app"', "Tr0ub@dor:3#x/")
c(K, "db-replica.internal:5432:*:replicator:{}", "rEpl1cat0r-Night")
c(K, "spring.datasource.url=jdbc:sqlserver://sql01:1433;databaseName=hr;user=hr_ro;password={};", "Hr\"Read'Only9")

# passwords on command lines
c(L, "mysqldump --user=backup --password={} --all-databases > /backups/all.sql", "Wint3r!sComing")
c(L, "keytool -importcert -alias corp-ca -file ca.pem -keystore truststore.jks -storepass {} -keypass {}", "changeit-Q4x9", "k3yP@ss-2026")
c(L, "sqlplus scott/{}@ORCLPDB1 @migrate.sql", "Tiger2024x")
c(L, "net use Z: \\\\fs01\\finance {} /user:CORP\\jsmith /persistent:no", "Ledger#Spring26")
c(L, "docker run -d --name pg -e POSTGRES_PASSWORD={} -p 5432:5432 postgres:16", "pgL0cal-Dev!")
c(L, "kubectl create secret generic api-db --from-literal=username=api --from-literal=password={}", "S3cretApiDb77")
c(L, 'mongosh "mongodb://db1.internal:27017" -u admin -p {} --authenticationDatabase admin', "M0ngoRoot!x")
c(L, 'ldapsearch -x -H ldaps://ldap.example.org -D "cn=admin,dc=example,dc=org" -w {} -b "dc=example,dc=org"', "Ldap$Adm1n")

# password hashes in crypt formats
c(H, "deploy:$apr1$" + salt("ho2-apr-s", 8) + "${}", salt("ho2-apr-h", 22))
c(H, "alice:$y$j9T$" + salt("ho2-y-s", 22) + "${}:19876:0:99999:7:::", salt("ho2-y-h", 43))
c(H, 'PASSWORD_HASH = "$argon2id$v=19$m=65536,t=3,p=4$' + b64("ho2-arg-s", 22) + '${}"', b64("ho2-arg-h", 43))
c(H, "users:\n  - name: admin\n    password_hash: $2b$12${}", salt("ho2-bcrypt", 53))
c(H, "root:$6$rounds=5000$" + salt("ho2-sha512-s", 16) + "${}:19500:0:99999:7:::", salt("ho2-sha512-h", 86))

# provider secrets
c(V, "TEAMS_WEBHOOK=https://contoso.webhook.office.com/webhookb2/5f1c2b9e-7d3a-4e21-9a6b-0c8d4f2e1a37@72f988bf-86f1-41af-91ab-2d7cd011db47/IncomingWebhook/{}/3b9d7e51-2c4a-4f8e-b1d6-9a0e5c7f2d18", h("ho2-teams", 32))
c(V, "curl -o report.pdf 'https://acme-reports.s3.amazonaws.com/q3/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIA4EXAMPLE7Q%2F20261125%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261125T101500Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={}'", h("ho2-s3sig", 64))
c(V, "otpauth://totp/Acme:jane%40acme.io?secret={}&issuer=Acme&digits=6", b32("ho2-totp", 32))
c(V, "hardhat deployer private key: {}", h("ho2-ethkey", 64))
c(V, "[Interface]\nAddress = 10.8.0.2/24\nPrivateKey = {}=\nDNS = 1.1.1.1", b64("ho2-wg", 43))
c(V, "...pasted from the vault export:\nMIIEpAIBAAKCAQEA{}\n{}\n{}\n-----END RSA PRIVATE KEY-----", b64("ho2-pem1", 48), b64("ho2-pem2", 64), b64("ho2-pem3", 64))
c(V, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: billing-db\ntype: Opaque\ndata:\n  db-password: {}\n  api-token: {}", b64("ho2-k8s-pw", 24), b64("ho2-k8s-tok", 44))
c(V, "REGISTRY_CREDS=ci-bot:{}", "Regi5try-Push-88")
c(V, "GitHub recovery codes for @jdoe (keep safe):\n{}\n{}\n{}", h("ho2-rc1", 5) + "-" + h("ho2-rc2", 5), h("ho2-rc3", 5) + "-" + h("ho2-rc4", 5), h("ho2-rc5", 5) + "-" + h("ho2-rc6", 5))
c(V, "Ledger seed phrase: {}", "orbit lumber cactus velvet hollow sample tiger fringe amateur dove inmate rescue")

# credentials in prose
c(R, "You can ssh in with password {} until we rotate it on Friday.", "Gr33nTea!42")
c(R, "Staging console login: admin / {}", "Staging#Adm1n")
c(R, "For the FTP box use user deploy, pass {} and port 21.", "Ftp-Dep10y")
c(R, "fyi the root password on the NAS is {} btw, don't share it", "nasR00t2026")
c(R, "Hi Mark, your temporary credentials are username jmark and password {} - please change them on first login.", "Temp-Xq7!vPw")

# near misses that must survive untouched
NEAR_MISSES_2 += [
    (L, "ssh -p 2222 deploy@bastion.example.com"),
    (L, "mysql -u root -p"),
    (L, "docker run -d -p 8080:80 nginx:1.27.2"),
    (L, "kubectl get secret api-db -n billing -o yaml"),
    (P, "PASSWORD_MIN_LENGTH=12"),
    (P, "LOG_LEVEL=debug"),
    (P, 'PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]'),
    (P, "password_reset_url: https://example.com/account/reset"),
    (R, "Passwords must be at least twelve characters long and are rotated every 90 days."),
    (R, "I forgot my password again, can you send me a reset link?"),
    (R, "The password field is optional when SSO is enabled."),
    (V, "Fixed in commit 9b2e4c1d7a3f5e6b8c0d2f4a6b8c1e3d5f7a9b0c, see the changelog."),
    (V, "request_id: 8d3e5f2a-1b4c-4d6e-9f0a-2b3c4d5e6f70"),
    (V, "AWS_REGION=eu-west-1"),
    (K, "cat /var/lib/postgresql/16/main/pg_hba.conf"),
    (K, "DATABASE_URL=postgres://localhost:5432/app"),
    (K, "host=db.internal port=5432 dbname=warehouse sslmode=require"),
    (K, "Server=tcp:sql01,1433;Database=Billing;Integrated Security=SSPI;"),
    (H, "Python 3.12.4 (main, Jun  6 2024, 18:26:44) [GCC 12.2.0] on linux"),
    (H, "version: 2.14.0\nrequires: [\"pyyaml>=6.0.1\"]"),
]
