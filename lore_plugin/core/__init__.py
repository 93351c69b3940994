"""The pure core: plain types, named errors, settings, and the small file helpers every layer
shares. It imports nothing from the rest of Lore, and does no I/O beyond files.

    types       frozen value types (Fragment, NewFragment, Edge, HookEvent …)
    errors      the small tree of named errors the CLI turns into messages
    configfile  ~/.lore/config.toml and the LORE_* environment, as plain values
    config      the one frozen Settings object built from them
    controls    the user's off switches (pause, resume, ingestion disabled)
    project     which project a folder belongs to (its repository)
    private     owner-only files and folders
    locks       non-blocking cross-process file locks
    timeparse   time expressions in a query → a time window
    relevance   the memory model as pure functions: decay, reinforcement, activation"""
