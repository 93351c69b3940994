"""Writing the shared part of an extraction into the repository's team space (issue 29),
exactly once, before the rest is written to the member's own space.

The two spaces are two databases, so no one transaction holds both. Each holds its own
watermark for the transcript, committed with its fragments: the team part first (fragments
and the team space's watermark in one hub transaction), then the rest (with the member's
watermark). A crash between the two makes the next run extract the slice again; the team
space's watermark is already past it, so its part is not written twice, and only the local
part is applied. A team space that cannot be reached raises TeamSpaceDown: the slice waits,
both watermarks unmoved, nothing lost. A member the space refuses (not in it, or read-only)
keeps the whole extraction local instead: their own memory must not wait on a team."""

from __future__ import annotations

import getpass
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.config import Settings
from ..core.errors import ConfigError, LoreError
from ..core.teamconfig import team_space
from ..recall.memory import Memory
from .extract import Extraction
from .known import KNOWN_SENT, Known, known_facts
from .sharing import shared_count, split

if TYPE_CHECKING:
    from .routing import Routes
    from .transcript import Delta

log = logging.getLogger("lore.capture")
TEAM_KNOWN = KNOWN_SENT // 2  # the team's facts in a digest, beside the member's own
AUTHOR_KEY = "author"  # metadata: the member's role, until the hub records it itself


class TeamSpaceDown(LoreError):
    """The team space could not be written; the slice waits for it."""


def member_role(settings: Settings) -> str:
    """The PostgreSQL role this member connects as: the URL's user, else libpq's (PGUSER,
    then the account's name)."""
    user = urlsplit(settings.hub_url or "").username
    return user or os.environ.get("PGUSER") or getpass.getuser()


Apply = Callable[..., object]  # Ingestor.apply(memory, extraction, delta, key, session, ...)


class TeamWriter:
    """Per ingestor: splits each extraction of an opted-in repository and writes the shared
    part through `apply` (the ingestor's own, so the team space gets the same hierarchy,
    dedup and linking)."""

    def __init__(self, settings: Settings, routes: Routes) -> None:
        self.settings, self.routes = settings, routes

    def _space(self, memory: Memory, delta: Delta, warn: bool = True) -> str | None:
        """The team space this slice's repository shares into, unless there is none or the
        member routes all of it there already."""
        writing_to = getattr(memory.writer, "space", "local")  # a HubStore knows its space
        space, warnings = team_space(self.settings.hub_url, self.settings.share_overrides,
                                     delta.cwd)
        for warning in warnings if warn else ():
            log.warning("%s", warning)
        return None if space is None or space == writing_to else space

    def known(self, memory: Memory, delta: Delta, asked: str, own: Known) -> Known:
        """The member's digest of known facts, joined by the team space's facts most related
        to the slice (issue 29), so that the extractor skips what the team knows and can name
        a teammate's fact it corrects by its id. The team's part is best effort: a space that
        cannot be read now leaves the member's digest as it was (the slice's share, later,
        decides whether to wait for it)."""
        space = self._space(memory, delta, warn=False)
        if space is None:
            return own
        try:
            team = self.routes.memory(space, memory)
            team.project = memory.project
            theirs = known_facts(team, asked, limit=TEAM_KNOWN, after=len(own.ids))
        except Exception as exc:  # noqa: BLE001 - the digest helps; it must not cost the slice
            log.info("no team facts in the digest (%s): %s", space, exc)
            return own
        return Known(own.lines + theirs.lines, {**own.ids, **theirs.ids})

    def share(self, memory: Memory, extraction: Extraction, delta: Delta, key: str,
              session_id: str | None, apply: Apply, digest: Known | None = None) -> Extraction:
        """What is left for `memory` after the shared part went to the team space. `digest`
        names the facts a correction may point at by id (known())."""
        space = self._space(memory, delta)
        if space is None:
            return extraction  # not shared, or the member routes all of it there already
        shared, kept = split(extraction)
        if not shared_count(shared):
            return kept
        from ..hub.errors import HubAccessDenied, HubError, UnknownSpace

        try:
            team = self.routes.memory(space, memory)
            if team.writer.watermark(key) >= delta.end_offset:
                log.info("%s @%d: already shared into %s", key, delta.start_offset, space)
                return kept
            team.project = memory.project
            apply(team, shared, delta, key, session_id, author=member_role(self.settings),
                  **({"digest": digest} if digest is not None else {}))
        except (UnknownSpace, HubAccessDenied) as exc:
            # Not a member (or a reader): sharing is not this member's to do, and waiting
            # would stall their own memory for good. Everything stays theirs.
            log.warning("not shared into %s (%s); kept local", space, exc)
            return extraction
        except (HubError, ConfigError) as exc:
            self.routes.drop(space)
            raise TeamSpaceDown(f"team space {space} not reached; the slice waits: {exc}"
                                ) from exc
        log.info("%s @%d: %d fact(s) shared into %s", key, delta.start_offset,
                 shared_count(shared), space)
        return kept

