"""Which project a folder belongs to: the repository, not the folder, and the same one on
every machine.

A repository with a network remote (`origin`, or its only remote) is keyed by that remote's
normalised URL, `host/owner/repo`, so one repository cloned at two paths on two machines is one
project. Without one, worktrees and subfolders of a repository share the folder that holds its
git common directory (the main checkout), and a folder outside any repository is its own key.
`.git` files, folders and `config` are read directly with the standard library: the per-prompt
hook asks this, and a `git` subprocess would cost it more than its whole budget."""

from __future__ import annotations

import os

from .remote import normalise_remote, remote_url

_MAX_GITFILE = 4096  # a .git file is one line; anything longer is not one
_MAX_CONFIG = 256 * 1024  # a repository's config is a few hundred bytes


def _read_small(path: str, limit: int = _MAX_GITFILE) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _git_dir(dot_git: str) -> str | None:
    """The git directory a `.git` entry names: itself when it is a folder, the `gitdir:` line's
    target when it is a file (linked worktrees and submodules)."""
    if os.path.isdir(dot_git):
        return dot_git
    text = _read_small(dot_git)
    if not text or not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:"):].strip()
    target = target.splitlines()[0].strip() if target else ""
    if not target:
        return None
    git_dir = os.path.realpath(os.path.join(os.path.dirname(dot_git), target))
    return git_dir if os.path.isdir(git_dir) else None  # a dangling link names no repository


def git_common_dir(folder: str) -> str | None:
    """The git common directory of the repository `folder` is in, or None outside one."""
    current = folder
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.lexists(dot_git):
            git_dir = _git_dir(dot_git)
            if git_dir is not None:
                common = _read_small(os.path.join(git_dir, "commondir"))
                if common and common.strip():
                    return os.path.realpath(os.path.join(git_dir, common.strip()))
                return git_dir
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def path_key(cwd: str) -> str:
    """The key by path alone (Lore's key before issue 28, still the key of a repository with
    no network remote). Inside a git repository: the folder of its common `.git` directory
    (the main checkout), so every worktree and subfolder of it shares one key; a bare or
    unusual layout keys on the common directory itself. Elsewhere: the absolute,
    symlink-resolved path, no trailing slash."""
    return _keys(cwd)[1]


def project_key(cwd: str) -> str:
    """A stable project identifier: the repository's normalised remote URL when it has a
    network remote (see remote.py), its `path_key` otherwise."""
    return _keys(cwd)[0]


def project_keys(cwd: str) -> tuple[str, str]:
    """(project key, path key): equal unless the repository is known by its remote."""
    return _keys(cwd)


def _keys(cwd: str) -> tuple[str, str]:
    resolved = os.path.realpath(os.path.expanduser(cwd)).rstrip("/") or "/"
    common = git_common_dir(resolved)
    if common is None:
        return resolved, resolved
    common = common.rstrip("/") or "/"
    path = (os.path.dirname(common) or "/") if os.path.basename(common) == ".git" else common
    config = _read_small(os.path.join(common, "config"), _MAX_CONFIG)
    remote = normalise_remote(remote_url(config)) if config else None
    return remote or path, path
