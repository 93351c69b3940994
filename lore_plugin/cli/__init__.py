"""The `lore` command. It turns domain errors into one-line messages and exit codes.

    main     the parser, the everyday commands, and main()
    ops      serving, consolidation and the viewer
    maint    ingest, doctor, export, import, forget, pause and prepare
    opening  how a command opens the memory"""

from .main import main

__all__ = ["main"]
