"""A repository's remote URL, read from its git config, and the form that names it everywhere.

The same repository is cloned as `git@github.com:Owner/Repo.git` on one machine and
`https://github.com/Owner/Repo` on another; both normalise to `github.com/Owner/Repo`. What a
URL may carry besides (a user, a password or token, a port, a query) is dropped, so a
credential pasted into a remote never becomes part of a project key, which is stored and shown.
Standard library only: the per-prompt hook reaches this through project.py."""

from __future__ import annotations

_NETWORK_SCHEMES = ("ssh", "git", "http", "https", "git+ssh", "ssh+git", "ftp", "ftps")


def remote_url(config: str) -> str | None:
    """The URL of the `origin` remote in a git config text, else of its only remote, else
    None. A small reader of git's format: `[remote "name"]` sections, `url = value` keys
    (case-insensitive), quotes and `#`/`;` comments."""
    urls: dict[str, str] = {}
    section: str | None = None
    for raw in config.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            header = line[1:line.find("]")] if "]" in line else ""
            kind, _, name = header.partition(" ")
            name = name.strip().strip('"')
            section = name if kind.strip().lower() == "remote" and name else None
            continue
        if section is None or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.strip().lower() != "url" or section in urls:
            continue  # the first url of a remote is the one git fetches from
        urls[section] = _value(value)
    if "origin" in urls:
        return urls["origin"] or None
    return next(iter(urls.values())) or None if len(urls) == 1 else None


def _value(text: str) -> str:
    """A config value: quotes removed, a trailing comment outside quotes cut off."""
    out: list[str] = []
    quoted = False
    for ch in text.strip():
        if ch == '"':
            quoted = not quoted
            continue
        if ch in "#;" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


def normalise_remote(url: str | None) -> str | None:
    """`host/path` for a network remote: host lower-cased, user, password, port, query and a
    `.git` suffix dropped. None for a local path, a `file:` URL or anything unparseable (the
    repository is then known by its path)."""
    if not url:
        return None
    url = url.strip()
    if "://" in url:
        scheme, _, rest = url.partition("://")
        if scheme.lower() not in _NETWORK_SCHEMES:
            return None
        netloc, slash, path = rest.partition("/")
        if not slash:
            return None
    else:
        # scp-like `[user@]host:path`: a colon before any slash (git's own rule), and not a
        # Windows drive letter.
        colon, slash_at = url.find(":"), url.find("/")
        if colon <= 1 or (0 <= slash_at < colon):
            return None
        netloc, path = url[:colon], url[colon + 1:]
    host = _host(netloc)
    path = path.split("?")[0].split("#")[0].strip("/")
    if path.startswith("~"):
        path = path[1:].lstrip("/")  # ssh://host/~user/repo: the home-relative form
    while path.endswith(".git") or path.endswith("/"):
        path = path[:-4] if path.endswith(".git") else path[:-1]
    if not host or not path or any(part in ("", ".", "..") for part in path.split("/")):
        return None
    return f"{host}/{path}"


def _host(netloc: str) -> str:
    """The host of `[user[:password]@]host[:port]`, lower-cased; IPv6 keeps its brackets."""
    host = netloc.rpartition("@")[2]  # the password may hold an '@'; the host never does
    if host.startswith("["):
        return host[:host.find("]") + 1].lower() if "]" in host else ""
    host = host.partition(":")[0]
    if any(ch in host for ch in " \t\\"):
        return ""
    return host.lower().rstrip(".")
