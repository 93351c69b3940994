"""A fake model for team sharing: for each user line written `basis/scope: text` it records
one fact with that basis and scope, as a real model classifies what it reads. The text is
copied as the model received it, so a secret in the transcript arrives already redacted,
exactly as a real model would repeat the redacted slice."""

from __future__ import annotations

import json
import re

from tests.fake_anthropic import Reply, text_reply, tool_reply
from tests.knowledge_api import conversation_text

LINE = re.compile(r"\b(stated|observed|inferred)/(project|personal|other|general|unsaid): "
                  r"([^\"\\]+?)(?:\.|\\n|\"|$)")

CORRECTS = re.compile(r"\bcorrects: ([^\"\\]+?) => ([^\"\\]+?)(?:\.|\\n|\"|$)")  # old => new


def known_ids(body: dict) -> list[tuple[str, str]]:
    """(id, line) of each known fact the request's digest lists."""
    prompt = "\n".join(
        m["content"] if isinstance(m["content"], str) else
        "\n".join(b.get("text", "") for b in m["content"] if isinstance(b, dict))
        for m in body.get("messages", []))
    if "<known_facts>" not in prompt:
        return []
    block = prompt[prompt.index("<known_facts>"):prompt.index("</known_facts>")]
    return re.findall(r"^\[(k\d+)\] (.*)$", block, re.M)


def team_extraction(text: str, tag: str = "", known: list[tuple[str, str]] | None = None
                    ) -> dict:
    facts = []
    for basis, scope, said in LINE.findall(text):
        fact = {"summary": said.strip() + tag, "importance": "high", "basis": basis,
                "content": f"{said.strip()}."}
        if scope != "unsaid":
            fact["scope"] = scope
        facts.append(fact)
    corrections = []
    for old, new in CORRECTS.findall(text):  # the digest's id of the fact, as a model would
        said = {"old": old.strip(), "new": new.strip() + tag, "topic": "Platform API"}
        ids = [k for k, line in known or () if old.strip() in line]
        corrections.append({**said, "id": ids[0]} if ids else said)
    if not facts:
        return {"topics": []}
    return {"topics": [{"name": "Platform API", "summary": "The platform API repository",
                        "importance": "high",
                        "concepts": [{"name": "Conventions", "summary": "How the team works",
                                      "importance": "high", "facts": facts}]}],
            "corrections": corrections}


class TeamModel:
    def __init__(self, tag_requests: bool = False) -> None:
        self.calls = 0
        self.tag_requests = tag_requests  # " #n": a slice extracted twice shows twice

    def __call__(self, body: dict) -> Reply:
        if not body.get("tools"):
            return text_reply("ok")
        self.calls += 1
        tag = f" #{self.calls}" if self.tag_requests else ""
        return tool_reply("record_knowledge", team_extraction(conversation_text(body), tag,
                                                              known_ids(body)))


def stored(rows: list[dict]) -> dict[str, dict]:
    """Facts (depth 2 and below) by summary, from exported rows."""
    out = {}
    for row in rows:
        if row["depth"] >= 2:
            meta = row["metadata"]
            row = dict(row, metadata=json.loads(meta) if isinstance(meta, str) else meta)
            out[row["summary"]] = row
    return out


def make_repo(folder, remote: str = "git@github.com:acme/platform-api.git",
              space: str | None = None):
    """A real git repository with an `origin` remote, and a committed `.lore.toml` naming
    `space` when one is given."""
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "remote", "add", "origin", remote], check=True)
    if space is not None:
        (folder / ".lore.toml").write_text(f'space = "{space}"\n')
        subprocess.run([*git, "add", ".lore.toml"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "Share with the team"], check=True)
    return folder


def as_role(admin_url: str, role: str) -> str:
    """The hub's URL with another user in it (no password: the test server trusts its socket)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(admin_url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, ""))


def make_roles(admin_url: str, *kinds: str) -> dict[str, str]:
    """One fresh LOGIN role per kind (roles outlive a database, so the names are new each
    time): kind -> role name."""
    import os

    import psycopg

    suffix = os.urandom(4).hex()
    names = {kind: f"{kind}_{suffix}" for kind in kinds}
    with psycopg.connect(admin_url, autocommit=True) as su:
        for name in names.values():
            su.execute(f"CREATE ROLE {name} LOGIN")  # a hex suffix: a plain identifier
    return names
