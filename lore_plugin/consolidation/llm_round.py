"""Phases 3 and 4 of the cycle: the LLM phases, in their order, each recorded in the report
the same way (its outcome, its count, and why it was skipped: a dry run, or no LLM)."""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..store import Store

if TYPE_CHECKING:  # pydantic and the LLM phases load on first use
    from ..embedding.embedder import Embedder
    from ..llm.client import LLM
    from .llm_phases import PhaseOutcome

log = logging.getLogger(__name__)


class Run(Protocol):  # cycle.Run, as these phases use it
    store: Store
    now: float
    dry_run: bool
    report: dict[str, Any]

    def phase(self, name: str, started: float, **values: Any) -> dict[str, Any]: ...


def run_llm_phases(run: Run, llm: LLM | None, embedder: Embedder | None,
                   llm_missing: str | None) -> None:
    from .cue_writing import write_cues
    from .heading_naming import name_headings
    from .llm_phases import resolve_contradictions, resummarise

    activity = run.store.child_activity()
    for name, key, phase in (  # headings named first: the topics' new text then names them
            ("heading_names", "renamed", partial(name_headings, embedder=embedder)),
            ("resummarise", "resummarised", partial(resummarise, embedder=embedder)),
            ("contradictions", "contradictions", resolve_contradictions),
            ("cues", "cued", write_cues)):  # last: a note superseded above needs none
        t = time.perf_counter()
        _record(run, name, phase(run.store, activity, llm, now=run.now, dry_run=run.dry_run),
                t, key, llm_missing)
    if not run.dry_run and embedder is not None and getattr(embedder, "available", True):
        fill_cue_vectors_after(run, embedder)


def fill_cue_vectors_after(run: Run, embedder: Embedder) -> None:
    """The vectors of the cues just written (and of any other note due one), after their
    commit: the per-prompt judge reads them (recall/cue_vector_fill.py). Best effort: what
    is left due, the memory service fills."""
    from ..recall.cue_vector_fill import fill_cue_vectors

    t = time.perf_counter()
    try:
        run.phase("cue_vectors", t, notes=fill_cue_vectors(run.store, embedder))
    except Exception as exc:  # noqa: BLE001 - left due; consolidation goes on
        log.warning("could not fill cue vectors: %s", exc)
        run.phase("cue_vectors", t, notes=0, error=str(exc)[:200])


def _record(run: Run, name: str, outcome: PhaseOutcome, started: float, count_key: str,
            llm_missing: str | None) -> None:
    run.phase(name, started, **outcome.as_dict())  # a stop, if any, is in there
    run.report[count_key] = outcome.done
    if run.dry_run:
        run.report["skipped"][name] = f"dry run: the LLM is not called; {outcome.due} due"
    elif llm_missing is not None:
        run.report["skipped"][name] = f"{llm_missing}; {outcome.due} due"
