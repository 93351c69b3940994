"""Consolidation of hub spaces (issue 28): the same seven-phase cycle (cycle.py) on each hub
space this Lore uses and may write, once at a time across every machine.

- Which spaces: those the settings name (`Settings.hub_spaces`: `[hub] read`, else the
  spaces something writes to) where this role is an owner or a member. A space it only
  reads is left to those who write it; a hub space nobody here uses is not ours to tend.
- When: the schedule lives in the hub, in the space's meta (`last_consolidation`), so every
  machine sees the same clock and a space consolidated by one machine is not due on another.
- Once at a time: under a PostgreSQL advisory lock on (space, "consolidation"), taken with
  pg_try_advisory_lock: a second machine skips at once instead of waiting, and the server
  frees the lock of a holder that died with its connection. Overdue is asked again under the
  lock, so a machine that started just as another finished does not run it twice.
- A hub that is down, a space that went away, a role removed from it: that space is skipped
  with one log line, the others and the local cycle go on. Nothing here raises.

Forgetting in a team space follows the author/owner rule (hub/forgetting.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.config import Settings
from ..core.errors import LLMUnavailable, LoreError
from .cycle import Clock, consolidate
from .schedule import default_embedder, default_llm, summary_line

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from ..hub import HubStore
    from ..llm.client import LLM

log = logging.getLogger(__name__)
LOCK_NAME = "consolidation"  # hub/ledger.py's advisory_lock key is (space, this)


def _open(settings: Settings, space: str) -> HubStore:
    from ..capture.hub_link import open_store

    return open_store(settings, space)


def space_overdue(settings: Settings, store: HubStore, clock: Clock) -> bool:
    """Whether the space's last real cycle, on any machine, is older than the interval."""
    previous = store.last_consolidated()
    if previous is None:
        return True
    elapsed = clock() - previous
    return elapsed >= settings.consolidation_interval_secs or elapsed < 0  # or a clock went back


class _Tools:
    """The LLM and the embedder, made once for all the spaces and only when a cycle runs."""

    def __init__(self, settings: Settings, make_llm: Callable[[Settings], LLM],
                 make_embedder: Callable[[Settings], Embedder | None]) -> None:
        self.settings, self.make_llm, self.make_embedder = settings, make_llm, make_embedder
        self.made = False
        self.llm: LLM | None = None
        self.llm_missing: str | None = None
        self.embedder: Embedder | None = None

    def get(self) -> _Tools:
        if not self.made:
            self.made = True
            try:
                self.llm = self.make_llm(self.settings)
            except LLMUnavailable as exc:
                self.llm_missing = f"no LLM ({exc})"
            self.embedder = self.make_embedder(self.settings)
        return self


def consolidate_space(settings: Settings, store: HubStore, clock: Clock, tools: _Tools,
                      force: bool = False) -> dict[str, Any] | str:
    """The cycle on one open space when it is due and this machine gets the lock: its
    report, or a word saying why it did not run ("read-only", "not due", "locked")."""
    if not store.may_write():
        return "read-only"
    if not force and not space_overdue(settings, store, clock):
        return "not due"
    with store.advisory_lock(LOCK_NAME) as got:
        if not got:
            log.info("hub space %s: another machine is consolidating it", store.space)
            return "locked"
        if not force and not space_overdue(settings, store, clock):
            return "not due"  # another machine finished just before we took the lock
        t = tools.get()
        return consolidate(settings, store, clock, t.llm,  # type: ignore[arg-type]
                           t.embedder, llm_missing=t.llm_missing)


def run_hub_if_overdue(settings: Settings, clock: Clock, force: bool = False,
                       make_llm: Callable[[Settings], LLM] = default_llm,
                       make_embedder: Callable[[Settings], Embedder | None] = default_embedder,
                       open_space: Callable[[Settings, str], HubStore] = _open,
                       ) -> dict[str, dict[str, Any] | str]:
    """Runs the cycle on every due hub space this Lore uses and may write. Returns, per
    space, its report or why it did not run; never raises (the worker and the CLI go on)."""
    tools = _Tools(settings, make_llm, make_embedder)
    outcomes: dict[str, dict[str, Any] | str] = {}
    for space in settings.hub_spaces:
        try:
            store = open_space(settings, space)
        except LoreError as exc:  # down, unknown space, no access, bad password setting
            log.warning("hub space %s not consolidated: %s", space, exc)
            outcomes[space] = f"skipped: {exc}"
            continue
        try:
            outcome = consolidate_space(settings, store, clock, tools, force)
            if isinstance(outcome, dict):
                log.info("hub space %s consolidated in %.2fs: %s", space,
                         outcome["duration_s"], summary_line(outcome))
            outcomes[space] = outcome
        except LoreError as exc:  # the hub went away mid-run: what committed is consistent
            log.warning("hub space %s: consolidation stopped: %s", space, exc)
            outcomes[space] = f"stopped: {exc}"
        except Exception as exc:  # a bug or a refusal not foreseen: the other spaces go on
            log.exception("hub space %s: consolidation crashed", space)
            outcomes[space] = f"stopped: {type(exc).__name__}"
        finally:
            store.close()
    return outcomes


def _open_read_only(settings: Settings, space: str) -> HubStore:
    from ..capture.hub_link import open_store

    return open_store(settings, space, read_only=True)


def preview_hub_spaces(settings: Settings, clock: Clock,
                       open_space: Callable[[Settings, str], HubStore] = _open_read_only,
                       ) -> dict[str, dict[str, Any] | str]:
    """`lore consolidate --dry-run` on each hub space this Lore uses and may write: the
    cycle's dry run (no LLM), through a connection whose every transaction the server keeps
    read-only, so a preview cannot change a space even by mistake; no lock, no schedule.
    Per space, its report or why there is none; never raises."""
    outcomes: dict[str, dict[str, Any] | str] = {}
    for space in settings.hub_spaces:
        try:
            store = open_space(settings, space)
        except LoreError as exc:
            outcomes[space] = f"skipped: {exc}"
            continue
        try:
            outcomes[space] = (consolidate(settings, store, clock, dry_run=True)  # type: ignore[arg-type]
                               if store.may_write() else "read-only")
        except LoreError as exc:
            outcomes[space] = f"stopped: {exc}"
        except Exception as exc:  # a bug in a preview must not cost the local report
            log.exception("hub space %s: preview crashed", space)
            outcomes[space] = f"stopped: {type(exc).__name__}"
        finally:
            store.close()
    return outcomes


_WHY = {"read-only": "not consolidated: this role only reads it",
        "not due": "not due (its schedule is kept in the hub, for every machine)",
        "locked": "another machine is consolidating it now"}


def describe_previews(outcomes: dict[str, dict[str, Any] | str]) -> list[str]:
    """`lore consolidate --dry-run`'s lines for the hub spaces: each one's dry run as the
    local file's is described, or one line saying why there is none."""
    from .schedule import describe

    lines: list[str] = []
    for space, o in outcomes.items():
        if isinstance(o, dict):
            lines += [f"hub space {space}:", *("  " + line for line in describe(o))]
        else:
            lines.append(f"hub space {space}: " + _WHY.get(o, o))
    return lines


def describe_outcomes(outcomes: dict[str, dict[str, Any] | str]) -> list[str]:
    """One line per hub space, for `lore consolidate`."""
    return [f"hub space {space}: " + (
        f"consolidated in {o.get('duration_s', 0):.2f}s: {summary_line(o)}"
        if isinstance(o, dict) else _WHY.get(o, o)) for space, o in outcomes.items()]
