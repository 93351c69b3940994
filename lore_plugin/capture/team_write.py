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
from .sharing import shared_count, split

if TYPE_CHECKING:
    from .routing import Routes
    from .transcript import Delta

log = logging.getLogger("lore.capture")
AUTHOR_KEY = "author"  # metadata: the member's role, until the hub records it itself


class TeamSpaceDown(LoreError):
    """The team space could not be written; the slice waits for it."""


def member_role(settings: Settings) -> str:
    """The PostgreSQL role this member connects as: the URL's user, else libpq's (PGUSER,
    then the account's name)."""
    user = urlsplit(settings.hub_url or "").username
    return user or os.environ.get("PGUSER") or getpass.getuser()


Apply = Callable[..., object]  # Ingestor.apply(memory, extraction, delta, key, session, author=)


class TeamWriter:
    """Per ingestor: splits each extraction of an opted-in repository and writes the shared
    part through `apply` (the ingestor's own, so the team space gets the same hierarchy,
    dedup and linking)."""

    def __init__(self, settings: Settings, routes: Routes) -> None:
        self.settings, self.routes = settings, routes

    def share(self, memory: Memory, extraction: Extraction, delta: Delta, key: str,
              session_id: str | None, apply: Apply) -> Extraction:
        """What is left for `memory` after the shared part went to the team space."""
        writing_to = getattr(memory.writer, "space", "local")  # a HubStore knows its space
        space, warnings = team_space(self.settings.hub_url, self.settings.share_overrides,
                                     delta.cwd)
        for warning in warnings:
            log.warning("%s", warning)
        if space is None or space == writing_to:
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
            apply(team, shared, delta, key, session_id, author=member_role(self.settings))
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

