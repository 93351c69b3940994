"""The `[hub]` section of config.toml and LORE_HUB_URL / LORE_HUB_SPACE (issue 28).

    [hub]
    url = "postgresql://me@db.example.com:5432/lore"   # no password here, ever
    space = "personal"                 # where new knowledge goes; "local" keeps it here
    password_env = "LORE_HUB_PASSWORD" # optional: the variable that holds the password
    read = ["personal", "platform"]    # optional: hub spaces recall reads (default: those written)
    connect_timeout = 3                # seconds
    [hub.projects]                     # optional routing: project key or glob -> space
    "github.com/acme/*" = "platform"
    "/home/me/scratch" = "local"

Checked here, once, so every surface sees the same answer: a password inside the URL disables
the hub (and is never echoed); a hub off loopback must use TLS, `sslmode=verify-full` unless the
URL says otherwise, and a URL that turns TLS off there disables the hub. Standard library only;
imported only when a hub is configured, so the per-turn hooks pay nothing without one."""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

LOCAL = "local"  # the SQLite file: private, never leaves the machine
DEFAULT_SPACE = "personal"
SPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")  # as the hub checks it
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_WEAK_TLS = {"require": "encrypts but does not check the server's certificate"}
_NO_TLS = ("disable", "allow", "prefer")


class HubConfigError(ValueError):
    """A hub setting that cannot be used; its message is one line, with no secret in it."""


def _host_of(parts: Any) -> str:
    host = parts.hostname or ""
    for key, value in parse_qsl(parts.query):
        if key == "host":  # libpq's ?host=... (a socket folder or a name) overrides the netloc
            host = value
    return host


def is_loopback(host: str) -> bool:
    """Whether libpq reaches `host` without leaving the machine: a Unix socket folder (or
    none: the default socket), localhost, or a loopback address."""
    if not host or host.startswith("/") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def checked_url(url: str) -> tuple[str, list[str]]:
    """(the URL to connect with, warnings). Raises HubConfigError for a URL that must not be
    used: not PostgreSQL, a password in it, or TLS turned off for a hub off this machine. A
    remote hub with no sslmode gets `verify-full`."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise HubConfigError("the hub URL is not a valid postgresql:// URL") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise HubConfigError("the hub URL must start with postgresql://")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.password or any(k == "password" and v for k, v in query):
        raise HubConfigError(
            "the hub URL holds a password; remove it and use PGPASSWORD, ~/.pgpass, a service "
            "file, a client certificate or [hub] password_env (the hub is off until then)")
    warnings: list[str] = []
    host = _host_of(parts)
    if not is_loopback(unquote(host)):
        mode = dict(query).get("sslmode")
        if mode is None:
            query.append(("sslmode", "verify-full"))
        elif mode in _NO_TLS:
            raise HubConfigError(
                f"the hub at {host} is not on this machine and sslmode={mode} would send "
                "memory and credentials without TLS; use sslmode=verify-full (the default)")
        elif mode in _WEAK_TLS:
            warnings.append(f"the hub at {host} uses sslmode={mode}, which "
                            f"{_WEAK_TLS[mode]}; verify-full is safer")
    fixed = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
    return fixed, warnings


def safe_url(url: str) -> str:
    """The URL as it may be shown: no password even if one slipped in."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an invalid URL)"
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@" + netloc.rpartition("@")[2]
    query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def space_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not SPACE_NAME.match(value):
        raise HubConfigError(f"{what} must be a space name (a-z, 0-9, ., _ and -, at most 63)")
    return value


def read_hub(table: object, env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Settings values for the hub (empty: no hub) and the warnings met. Never raises."""
    table = table if isinstance(table, dict) else {}
    url = env.get("LORE_HUB_URL") or table.get("url")
    if not url:
        return {}, []
    where = "LORE_HUB_URL" if env.get("LORE_HUB_URL") else "config [hub] url"
    warnings: list[str] = []
    try:
        if not isinstance(url, str):
            raise HubConfigError("must be a string")
        conninfo, warnings = checked_url(url)
    except HubConfigError as exc:
        return {}, [f"{where} ignored, no hub is used: {exc}"]
    values: dict[str, Any] = {"hub_url": conninfo}
    for key, attr, check in (
            ("space", "hub_space", lambda v: space_name(v, "[hub] space")),
            ("password_env", "hub_password_env", _env_name),
            ("read", "hub_read", _spaces),
            ("connect_timeout", "hub_connect_timeout", _timeout),
            ("projects", "hub_routes", _routes)):
        if key in table:
            try:
                values[attr] = check(table[key])
            except HubConfigError as exc:
                shown = "..." if key == "password_env" else repr(table[key])[:80]
                warnings.append(f"config [hub] {key} = {shown} ignored: {exc}")
    if env.get("LORE_HUB_SPACE"):
        try:
            values["hub_space"] = space_name(env["LORE_HUB_SPACE"], "LORE_HUB_SPACE")
        except HubConfigError as exc:
            warnings.append(f"LORE_HUB_SPACE ignored: {exc}")
    return values, warnings


def _env_name(value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise HubConfigError("not an environment variable name (the value is not shown, in "
                             "case it is the password itself)")
    return value


def _spaces(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise HubConfigError("expected a list of space names")
    return tuple(space_name(v, "each of [hub] read") for v in value)


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.2 <= value <= 60:
        raise HubConfigError("must be a number of seconds from 0.2 to 60")
    return float(value)


def _routes(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise HubConfigError('expected a table of "project or glob" = "space"')
    return tuple((str(k), space_name(v, f"[hub.projects] {k!r}")) for k, v in value.items())


def route(routes: tuple[tuple[str, str], ...], default: str, project: str | None) -> str:
    """The space `project` writes to: the first rule whose key or glob matches it, else the
    default space."""
    if project:
        for pattern, space in routes:
            if pattern == project or fnmatch.fnmatchcase(project, pattern):
                return space
    return default
