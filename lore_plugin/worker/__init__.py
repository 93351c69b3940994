"""The detached process that does the slow work: ingestion under a per-transcript lock, the
sweep of half-read transcripts, and overdue consolidation. The hooks start it as
`python -m lore_plugin.worker ingest PATH` or `… sweep`; it sits above capture and
consolidation because it runs both.

    run  the Worker and main()"""

from .run import Worker, main

__all__ = ["Worker", "main"]
