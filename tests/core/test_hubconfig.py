"""The [hub] section: no hub changes nothing, a password in the URL or TLS off a remote hub
disables it with one clear warning that never repeats the secret, routing picks a space."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.core.config import Settings, load_settings
from lore_plugin.core.hubconfig import checked_url, safe_url


def settings_with(tmp_path: Path, toml: str, **env: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(toml)
    return load_settings({"LORE_HOME": str(tmp_path), "LORE_CONFIG": str(config), **env})


def test_without_a_hub_every_setting_is_what_it_was(tmp_path: Path) -> None:
    plain = settings_with(tmp_path, "[ingestion]\nbatch_size = 7\n")
    bare = Settings(db_path=plain.db_path, home=plain.home, batch_size=7)

    assert plain == bare
    assert plain.hub_url is None and plain.hub_spaces == ()
    assert plain.space_for("github.com/acme/widgets") == "local"


def test_a_hub_on_loopback_is_used_as_written_and_routes_projects(tmp_path: Path) -> None:
    s = settings_with(tmp_path, """
[hub]
url = "postgresql://me@127.0.0.1:5432/lore"
space = "personal"
[hub.projects]
"github.com/acme/*" = "platform"
"/home/me/scratch" = "local"
""")
    assert s.hub_url == "postgresql://me@127.0.0.1:5432/lore"
    assert s.space_for("github.com/acme/widgets") == "platform"
    assert s.space_for("/home/me/scratch") == "local"
    assert s.space_for("github.com/other/thing") == "personal"
    assert s.space_for(None) == "personal"
    assert s.hub_spaces == ("personal", "platform")
    assert s.warnings == ()


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    s = settings_with(tmp_path, '[hub]\nurl = "postgresql://me@localhost/lore"\n',
                      LORE_HUB_URL="postgresql://you@localhost:6543/other", LORE_HUB_SPACE="work")

    assert s.hub_url == "postgresql://you@localhost:6543/other"
    assert s.space_for("anything") == "work"


@pytest.mark.parametrize("url", ["postgresql://me:hunter2secret@127.0.0.1/lore",
                                 "postgresql://me@127.0.0.1/lore?password=hunter2secret"])
def test_a_password_in_the_url_disables_the_hub_without_repeating_it(tmp_path: Path,
                                                                     url: str) -> None:
    s = settings_with(tmp_path, f'[hub]\nurl = "{url}"\n')

    assert s.hub_url is None
    assert s.space_for("p") == "local"
    assert len(s.warnings) == 1 and "password" in s.warnings[0]
    assert "hunter2secret" not in s.warnings[0]


def test_a_remote_hub_gets_verify_full_and_one_without_tls_is_refused(tmp_path: Path) -> None:
    url, warnings = checked_url("postgresql://me@db.example.com/lore")
    assert url == "postgresql://me@db.example.com/lore?sslmode=verify-full" and warnings == []

    _, weak = checked_url("postgresql://me@db.example.com/lore?sslmode=require")
    assert "verify-full" in weak[0]

    s = settings_with(tmp_path, '[hub]\nurl = "postgresql://me@10.1.2.3/lore?sslmode=disable"\n')
    assert s.hub_url is None and "TLS" in s.warnings[0]

    local, _ = checked_url("postgresql://me@[::1]:5432/lore?sslmode=disable")
    assert local.endswith("sslmode=disable")  # loopback: TLS is the user's choice


def test_bad_hub_values_are_ignored_one_line_each(tmp_path: Path) -> None:
    s = settings_with(tmp_path, """
[hub]
url = "postgresql://me@localhost/lore"
space = "Not A Space!"
password_env = "pw-Secret-value-123!"
connect_timeout = 0
[hub.projects]
"x" = 5
""")
    assert s.hub_url and s.hub_space == "personal" and s.hub_routes == ()
    assert len(s.warnings) == 4
    assert not any("pw-Secret-value-123" in w for w in s.warnings)


def test_a_url_is_shown_without_its_password() -> None:
    assert safe_url("postgresql://me:pw@h/db") == "postgresql://me:***@h/db"
    assert "pw" not in safe_url("postgresql://me@h/db?password=pw")
