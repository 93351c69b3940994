"""Which project a folder belongs to: the repository, not the folder.

Git worktrees and subfolders of one repository share one key, the folder that holds the git
common directory (the main checkout); a folder outside any repository is its own key. `.git`
files and folders are read directly with the standard library: the per-prompt hook asks this,
and a `git` subprocess would cost it more than its whole budget."""

from __future__ import annotations

import os

_MAX_GITFILE = 4096  # a .git file is one line; anything longer is not one


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(_MAX_GITFILE)
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


def project_key(cwd: str) -> str:
    """A stable project identifier. Inside a git repository: the folder of its common `.git`
    directory (the main checkout), so every worktree and subfolder of it shares one key; a
    bare or unusual layout keys on the common directory itself. Elsewhere: the absolute,
    symlink-resolved path, no trailing slash."""
    resolved = os.path.realpath(os.path.expanduser(cwd)).rstrip("/") or "/"
    common = git_common_dir(resolved)
    if common is None:
        return resolved
    common = common.rstrip("/") or "/"
    if os.path.basename(common) == ".git":
        return os.path.dirname(common) or "/"
    return common
