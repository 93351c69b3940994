"""Knowledge remembered under a repository's path before issue 28 moves to the repository's
remote key, so a project's own knowledge stays its own after the key changed."""

from __future__ import annotations

from pathlib import Path

from lore_plugin.capture.project_keys import adopt_remote_key, adopt_remote_keys
from lore_plugin.core.types import NewFragment
from lore_plugin.store import Store
from tests.core.test_project import git, repo

REMOTE = "github.com/Acme/Widgets"


def remembered(store: Store, project: str | None, summary: str) -> str:
    return store.insert(NewFragment(content=summary, summary=summary, depth=2, project=project),
                        now=1_750_000_000.0)


def test_the_sweep_moves_path_keyed_rows_of_a_repository_with_a_remote(tmp_path: Path) -> None:
    checkout = repo(tmp_path / "widgets")
    store = Store(tmp_path / "memory.db")
    old = str(checkout.resolve())
    kept = remembered(store, old, "widgets build with make dist")
    other = remembered(store, str(tmp_path / "gone"), "a project whose folder is gone")
    shared = remembered(store, None, "cross-project knowledge")
    git(checkout, "remote", "add", "origin", "git@github.com:Acme/Widgets.git")

    assert adopt_remote_keys(store) == {old: REMOTE}

    assert store.get(kept).project == REMOTE
    assert store.get(other).project == str(tmp_path / "gone")
    assert store.get(shared).project is None
    assert store.topic_totals(REMOTE) == (0, 0)
    assert {f.id for f, _, _ in store.knowledge_of(REMOTE, 10)} == {kept, shared}
    assert adopt_remote_keys(store) == {}  # a second pass has nothing to move
    store.close()


def test_ingestion_moves_the_rows_of_the_cwd_it_reads_and_returns_the_remote_key(
        tmp_path: Path) -> None:
    checkout = repo(tmp_path / "widgets", "https://github.com/Acme/Widgets.git")
    store = Store(tmp_path / "memory.db")
    kept = remembered(store, str(checkout.resolve()), "widgets build with make dist")

    assert adopt_remote_key(store, str(checkout)) == REMOTE
    assert store.get(kept).project == REMOTE
    store.close()


def test_a_repository_without_a_remote_keeps_its_rows_where_they_are(tmp_path: Path) -> None:
    checkout = repo(tmp_path / "widgets")
    store = Store(tmp_path / "memory.db")
    kept = remembered(store, str(checkout.resolve()), "widgets build with make dist")

    assert adopt_remote_keys(store) == {}
    assert adopt_remote_key(store, str(checkout)) == str(checkout.resolve())
    assert store.get(kept).project == str(checkout.resolve())
    store.close()
