"""Project identity across machines (issue 28): a repository is its normalised remote, the
same from every clone, and never carries a credential; without a network remote, its path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lore_plugin.core.project import path_key, project_key, project_keys
from lore_plugin.core.remote import normalise_remote, remote_url

SAME_REPO = [
    "git@github.com:Acme/Widgets.git",
    "https://github.com/Acme/Widgets",
    "https://github.com/Acme/Widgets.git/",
    "ssh://git@GitHub.com:22/Acme/Widgets.git",
    "ssh://git@github.com/Acme/Widgets",
    "git+ssh://git@github.com/Acme/Widgets.git",
    "https://ci-bot:ghp_s3cretT0kenValue@github.com/Acme/Widgets.git",
    "https://user:p%40ss@GITHUB.COM:443/Acme/Widgets.git?ref=main",
]


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def repo(folder: Path, remote: str | None = None, name: str = "origin") -> Path:
    folder.mkdir(parents=True)
    git(folder, "init", "-q")
    if remote:
        git(folder, "remote", "add", name, remote)
    return folder


@pytest.mark.parametrize("url", SAME_REPO)
def test_every_form_of_one_remote_normalises_to_one_key(url: str) -> None:
    assert normalise_remote(url) == "github.com/Acme/Widgets"


@pytest.mark.parametrize("url", ["/srv/git/widgets.git", "file:///srv/git/widgets.git",
                                 "../widgets", "C:/repos/widgets", "", "https://github.com",
                                 "https://host/../etc", "notaurl"])
def test_a_local_or_unparseable_remote_names_no_project(url: str) -> None:
    assert normalise_remote(url) is None


def test_a_credential_in_the_remote_never_reaches_the_key(tmp_path: Path) -> None:
    checkout = repo(tmp_path / "w", "https://ci-bot:ghp_s3cretT0kenValue@github.com/Acme/Widgets.git")

    key = project_key(str(checkout))

    assert key == "github.com/Acme/Widgets"
    assert "s3cret" not in key and "ci-bot" not in key


def test_two_clones_at_different_paths_are_one_project(tmp_path: Path) -> None:
    laptop = repo(tmp_path / "laptop" / "code" / "widgets", "git@github.com:Acme/Widgets.git")
    desktop = repo(tmp_path / "desktop" / "src" / "w2", "https://github.com/Acme/Widgets")
    (desktop / "pkg" / "sub").mkdir(parents=True)

    assert project_key(str(laptop)) == project_key(str(desktop / "pkg" / "sub"))
    assert project_keys(str(laptop)) == ("github.com/Acme/Widgets", str(laptop.resolve()))


def test_a_linked_worktree_shares_its_repositorys_remote_key(tmp_path: Path) -> None:
    main = repo(tmp_path / "main", "git@github.com:Acme/Widgets.git")
    git(main, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    git(main, "worktree", "add", "-q", str(tmp_path / "feature"))

    assert project_key(str(tmp_path / "feature")) == "github.com/Acme/Widgets"
    assert path_key(str(tmp_path / "feature")) == str(main.resolve())


def test_without_origin_the_only_remote_names_it_and_several_others_fall_back_to_the_path(
        tmp_path: Path) -> None:
    single = repo(tmp_path / "single", "git@gitlab.com:team/app.git", name="upstream")
    several = repo(tmp_path / "several", "git@gitlab.com:team/app.git", name="upstream")
    git(several, "remote", "add", "fork", "git@gitlab.com:me/app.git")

    assert project_key(str(single)) == "gitlab.com/team/app"
    assert project_key(str(several)) == str(several.resolve())


def test_a_repository_without_a_network_remote_keeps_its_path_key(tmp_path: Path) -> None:
    plain = repo(tmp_path / "plain")
    local = repo(tmp_path / "local", str(tmp_path / "bare.git"))
    outside = tmp_path / "notes"
    outside.mkdir()

    assert project_key(str(plain)) == str(plain.resolve())
    assert project_key(str(local)) == str(local.resolve())
    assert project_key(str(outside)) == str(outside.resolve())


def test_the_config_reader_takes_origins_first_url_and_ignores_comments_and_quotes() -> None:
    config = """
[core]
    url = not-a-remote
; [remote "origin"] commented out
[remote "upstream"]
    url = git@example.com:a/b.git
[remote "origin"]
    # a comment
    URL = "https://example.com/team/app.git" ; trailing comment
    url = https://example.com/other/second.git
    fetch = +refs/heads/*:refs/remotes/origin/*
"""
    assert remote_url(config) == "https://example.com/team/app.git"
    assert remote_url("[core]\n\tbare = false\n") is None
