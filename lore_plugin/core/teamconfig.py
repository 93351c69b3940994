"""Which team space a repository shares into (issue 29): nothing, unless the repository opts
in with a committed `.lore.toml` at its root, which the whole team sees in code review:

    space = "platform"

and a member may override that for themselves in ~/.lore/config.toml:

    [sharing]
    "github.com/acme/api" = false          # I opt out of sharing this repository
    "github.com/acme/*" = "platform-eu"    # I share these into another space

An override opts out of, or redirects, a repository that opted in; it never opts in one
that did not: the team agrees to share in code review, not one member alone. The first
matching key (a project key or a glob over it) wins.

Both files are read defensively: a `.lore.toml` over MAX_BYTES, not TOML, or with a bad space
name is ignored with one warning (nothing is shared), never an exception. Standard library only."""

from __future__ import annotations

import fnmatch
import os

from .hubconfig import LOCAL, HubConfigError, space_name

REPO_FILE = ".lore.toml"
MAX_BYTES = 16 * 1024  # a one-line file; anything this big is not one a team wrote for Lore
OPT_OUT = ""  # an override's value for `false`: this repository is not shared


def repo_root(cwd: str) -> str | None:
    """The checkout `cwd` is in (the folder holding its `.git` file or folder), or None
    outside a repository. A linked worktree is its own checkout with its own committed file."""
    current = os.path.realpath(os.path.expanduser(cwd))
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def read_repo_file(path: str) -> tuple[str | None, list[str]]:
    """(the space a `.lore.toml` names, warnings). None with no file, or one to ignore."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        return None, [f"{path} ignored, nothing is shared: {exc.strerror or exc}"]
    if len(raw) > MAX_BYTES:
        return None, [f"{path} ignored, nothing is shared: larger than {MAX_BYTES} bytes"]
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, [f"{path} ignored, nothing is shared: not valid TOML ({exc})"]
    if "space" not in data:
        return None, [f"{path} has no `space = \"name\"`; nothing is shared"]
    try:
        space = space_name(data["space"], f"{REPO_FILE} space")
    except HubConfigError as exc:
        return None, [f"{path} ignored, nothing is shared: {exc}"]
    if space == LOCAL:
        return None, []  # "local" is the private file: the same as not opting in
    return space, []


def read_sharing(table: object) -> tuple[dict[str, object], list[str]]:
    """Settings values for config.toml's `[sharing]` table, and the warnings met."""
    if not isinstance(table, dict):
        return {}, ["config [sharing] ignored: expected a table of \"project or glob\" = "
                     "false or \"space\""]
    rules: list[tuple[str, str]] = []
    warnings: list[str] = []
    for key, value in table.items():
        if value is False:
            rules.append((str(key), OPT_OUT))
            continue
        try:
            rules.append((str(key), space_name(value, f"[sharing] {key!r}")))
        except HubConfigError as exc:
            warnings.append(f"config [sharing] {key!r} ignored: {exc}, or false to opt out")
    return {"share_overrides": tuple(rules)}, warnings


def override(rules: tuple[tuple[str, str], ...], project: str) -> str | None:
    """The member's own rule for `project`: a space, OPT_OUT, or None (no rule)."""
    for pattern, value in rules:
        if pattern == project or fnmatch.fnmatchcase(project, pattern):
            return value
    return None


def team_space(hub_url: str | None, overrides: tuple[tuple[str, str], ...], cwd: str | None
               ) -> tuple[str | None, list[str]]:
    """(the team space the repository at `cwd` shares into, warnings). None: share nothing
    (no hub, no repository, no `.lore.toml`, or the member opted out). `overrides` are
    Settings.share_overrides."""
    if not hub_url or not cwd:
        return None, []
    root = repo_root(cwd)
    if root is None:
        return None, []
    space, warnings = read_repo_file(os.path.join(root, REPO_FILE))
    if space is None:
        return None, warnings
    from .project import project_key

    mine = override(overrides, project_key(cwd))
    if mine is not None:
        return (None if mine in (OPT_OUT, LOCAL) else mine), warnings
    return space, warnings
