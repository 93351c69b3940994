"""Cues between the local file and a hub (issue 30): `lore hub push` and `pull`, `lore share`
and `unshare` carry them both ways, and a note whose cues redaction touched stays local."""

from __future__ import annotations

import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.errors import InvalidInput
from lore_plugin.core.types import NewFragment
from lore_plugin.maintenance import hub_sync
from lore_plugin.maintenance.share_moves import share, unshare
from lore_plugin.store import Store
from tests.hub.conftest import CUES, SECRET, local_atlas
from tests.hub.test_hub_keywords import _found


def _settings(tmp_path, hub_url: str) -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path, hub_url=hub_url)



def test_push_and_pull_carry_cues_both_ways(tmp_path, hub_url, hub_space):
    settings = _settings(tmp_path, hub_url)
    local, _, fact = local_atlas(tmp_path / "memory.db")
    assert local.get(fact).cues == CUES
    assert hub_sync.push(settings, local, hub_space.space).fragments == 2
    assert hub_space.get(fact).cues == CUES and _found(hub_space, '"machine"') == [fact]
    other = Store(tmp_path / "other.db")
    assert hub_sync.pull(settings, other, hub_space.space).fragments == 2
    assert other.get(fact).cues == CUES
    local.close()
    other.close()


def test_share_and_unshare_keep_a_note_s_cues(tmp_path, hub_url, hub_space):
    settings = _settings(tmp_path, hub_url)
    local, _, fact = local_atlas(tmp_path / "memory.db")
    share(settings, local, fact, hub_space.space, None)
    assert hub_space.get(fact).cues == CUES and not local.has_fragment(fact)
    unshare(settings, local, fact, hub_space.space, None)
    assert local.get(fact).cues == CUES and not hub_space.has_fragment(fact)
    local.close()


def test_a_note_whose_cues_redaction_touched_stayslocal_atlas(tmp_path, hub_url, hub_space):
    settings = _settings(tmp_path, hub_url)
    local = Store(tmp_path / "memory.db")
    fid = local.insert(NewFragment(content="Staging login", summary="Staging login", depth=0,
                                   cues=f"token {SECRET}"), 1.0)
    with pytest.raises(InvalidInput, match="redaction"):
        share(settings, local, fid, hub_space.space, None)
    assert local.has_fragment(fid) and not hub_space.has_fragment(fid)
    local.close()
