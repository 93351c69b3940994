"""Rows remembered under a repository's path move to its remote key (issue 28).

Before issue 28 a project was keyed by its local path; now a repository with a network remote
is keyed by the remote, so that its clones on other machines share its knowledge. Rows keyed
by the old path would otherwise lose the project's preference in recall, the brief and the
recurring-failure notes (never their reachability by search). The key is moved rather than
both keys being read everywhere: one indexed UPDATE per repository, once, and every reader
stays as it is. It runs wherever a repository's path is in hand: in each ingestion batch (its
cwd), and in the SessionStart sweep over the paths the store already holds, which also catches
a repository that gains a remote later. A path that no longer exists is left as it is: nothing
can say what it was."""

from __future__ import annotations

import logging
import os

from ..core.project import project_keys
from ..store import Store

log = logging.getLogger("lore.capture")


def adopt_remote_key(store: Store, cwd: str) -> str:
    """The project key of `cwd`, after moving any rows kept under its path key to it."""
    key, path = project_keys(cwd)
    if key != path and isinstance(store, Store):  # a hub space never held path keys
        moved = store.rekey_project(path, key)
        if moved:
            log.info("project %s is now keyed by its remote %s (%d fragments)", path, key, moved)
    return key


def adopt_remote_keys(store: Store, limit: int = 500) -> dict[str, str]:
    """Every path-keyed project in `store` whose repository now has a remote key moves to it;
    returns {old: new} of those moved."""
    moved: dict[str, str] = {}
    for project in store.projects(limit):
        if not project.startswith("/") or not os.path.isdir(project):
            continue
        key, path = project_keys(project)
        if key != project and path == project:
            store.rekey_project(project, key)
            moved[project] = key
    return moved
