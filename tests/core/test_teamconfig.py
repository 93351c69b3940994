"""Which team space a repository shares into: its committed `.lore.toml`, read defensively,
and the member's own `[sharing]` overrides in config.toml."""

from __future__ import annotations

from lore_plugin.core.config import load_settings
from lore_plugin.core.teamconfig import MAX_BYTES, team_space
from tests.team_api import make_repo

HUB = "postgresql://alice@localhost/lore"


def test_nothing_is_shared_without_a_lore_toml_or_without_a_hub(tmp_path):
    repo = make_repo(tmp_path / "plain")
    assert team_space(HUB, (), str(repo)) == (None, [])
    shared = make_repo(tmp_path / "shared", space="platform")
    assert team_space(None, (), str(shared)) == (None, [])
    assert team_space(HUB, (), str(tmp_path)) == (None, [])  # outside any repository


def test_a_committed_lore_toml_names_the_space_from_any_subfolder(tmp_path):
    repo = make_repo(tmp_path / "repo", space="platform")
    (repo / "src" / "api").mkdir(parents=True)
    assert team_space(HUB, (), str(repo / "src" / "api")) == ("platform", [])


def test_a_bad_lore_toml_is_ignored_with_one_warning(tmp_path):
    repo = make_repo(tmp_path / "repo")
    for text, says in (('space = "Not A Space!"', "space name"), ("space = [", "not valid TOML"),
                       ("team = 'x'", "no `space"), ("space = 'x'\n" + "#" * MAX_BYTES, "larger"),
                       (b"\xff\xfe", "not valid TOML")):
        raw = text if isinstance(text, bytes) else text.encode()
        (repo / ".lore.toml").write_bytes(raw)
        space, warnings = team_space(HUB, (), str(repo))
        assert space is None and len(warnings) == 1 and says in warnings[0], (text, warnings)
    (repo / ".lore.toml").write_text('space = "local"')
    assert team_space(HUB, (), str(repo)) == (None, [])  # local is the private file


def test_a_member_opts_out_or_redirects_but_never_opts_in_alone(tmp_path):
    repo = make_repo(tmp_path / "repo", space="platform")
    other = make_repo(tmp_path / "other", remote="https://github.com/acme/other.git")
    key = "github.com/acme/platform-api"
    assert team_space(HUB, ((key, ""),), str(repo))[0] is None
    assert team_space(HUB, (("github.com/acme/*", "platform-eu"),), str(repo))[0] == "platform-eu"
    assert team_space(HUB, (("github.com/acme/*", "platform-eu"),), str(other))[0] is None


def test_config_sharing_table_is_read_and_bad_entries_warned(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[sharing]\n"github.com/acme/api" = false\n"github.com/acme/*" = "eu"\n'
                      '"x" = 3\n')
    settings = load_settings({"LORE_CONFIG": str(config), "LORE_HOME": str(tmp_path)})
    assert settings.share_overrides == (("github.com/acme/api", ""), ("github.com/acme/*", "eu"))
    assert any("[sharing] 'x'" in w for w in settings.warnings)
