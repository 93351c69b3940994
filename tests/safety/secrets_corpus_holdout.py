"""The hold-out fifth of the corpus by kind (secrets_corpus_kinds.py): every fifth case as it
was written, set aside before any rule was tuned. Rules are never tuned on these; the README
reports the share of them redaction holds.
"""

# ruff: noqa: E501  (a table of cases, one per line)

from __future__ import annotations

import base64

from tests.safety.secrets_corpus_kinds import Case, H, K, L, P, R, V, b32, b64, case, h, salt

HELD_OUT: list[Case] = []


def c(kind: str, template: str, *values: str) -> None:
    case(HELD_OUT, kind, template, *values)


# --- passphrases with spaces ---
c(P, "password = {0}", "purple monkey dishwasher 42")
c(P, "root password: {0}", "mango tiger laptop 77")
c(P, "SMTP password: '{0}'", "crimson falcon rises")
c(P, "The new password is \"{0}\", write it down.", "ocean seven brick lantern")
c(P, "Passwort: {0}", "grüne Wiese am Fluss")
# --- connection strings and URLs ---
c(K, "host=db port=5432 dbname=prod user=etl password={0} sslmode=require", "wH7$pQ3zR1")
c(K, "mysql://root:{0}@10.0.0.5:3306/shop", "se\"cr'et99")
c(K, "localhost:5432:*:replicator:{0}", "repl1cation-Key9")
c(K, "spring.datasource.url=jdbc:mysql://db:3306/shop?user=root&password={0}", "mYsq1Pw!")
c(K, "url: https://deploy:{0}@nexus.example.com:8081/repository/", "Nexus@Pw#12")
# --- passwords on command lines ---
c(L, "mysqldump -u backup -p{0} --all-databases", "Dump!Pw42")
c(L, "jarsigner -keystore rel.jks -storepass {0} app.apk rel", "JarSign#5")
c(L, "net use \\\\nas\\backup /user:admin {0}", "NasAdm1n#")
c(L, "kubectl create secret generic db --from-literal=DB_PASSWORD={0} --from-literal=user=app", "KubeDb!77")
c(L, "vncpasswd -f <<< {0}", "VncPass77")
c(L, "rabbitmqctl change_password admin {0}", "NewRabbit9!")
c(L, "wget --user=ci --password={0} https://repo/x.tgz", "WgetPw!2")
c(L, "influx auth -u admin -p {0}", "Influx#Pw2")
# --- password hashes ---
c(H, "root:{0}:19000:0:99999:7:::", "$6$" + salt("six", 16) + "$" + salt("six2", 86))
c(H, ".htpasswd:\nops:{0}", "{SHA}" + b64("shahtp", 27) + "=")
c(H, "mysql user auth string {0}", "*" + h("mysqlnative", 40).upper())
# --- provider secrets still missed ---
c(V, "old connector https://outlook.office.com/webhook/{0}", h("o1", 8) + "-" + h("o2", 4) + "-" + h("o3", 4) + "-" + h("o4", 4) + "-" + h("o5", 12) + "@" + h("o6", 8) + "-" + h("o7", 4) + "-" + h("o8", 4) + "-" + h("o9", 4) + "-" + h("o10", 12) + "/IncomingWebhook/" + h("o11", 32) + "/" + h("o12", 8) + "-" + h("o13", 4) + "-" + h("o14", 4) + "-" + h("o15", 4) + "-" + h("o16", 12))
c(V, "otpauth://totp/ACME:alice@example.com?secret={0}&issuer=ACME", b32("otp1", 32))
c(V, "PRIVATE_KEY={0}", h("pk", 64))
c(V, "[Peer]\nPublicKey = " + b64("wgpub", 43) + "=\nPresharedKey = {0}", b64("wgpsk", 43) + "=")
c(V, "apiVersion: v1\nkind: Secret\ndata:\n  password: {0}\n  username: YWRtaW4=", base64.b64encode(b"K8sSecretPw!42").decode())
c(V, "export REGISTRY_CREDS={0}", "robot$ci:RegCreds99x")
c(V, "seed phrase: {0}", "abandon ability able about above absent absorb abstract absurd abuse access accident")
c(V, "client_secret {0}", h("clisec", 40))
# --- credentials in prose ---
c(R, "Credentials: root / {0}", "RootCreds#1")
c(R, "login with user=svc pass={0}", "SvcPw!33")
c(R, "Grafana default admin/admin changed to admin/{0}", "GrafNew#2")
c(R, "the pin to the safe is {0}", "493817")
