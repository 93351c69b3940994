"""A person's hands on memory: looking at it, fixing it, taking it out and putting it back.

    status      what `lore status` and the SessionStart brief report
    operations  doctor, export and import, forgetting on request
    curation    edit, correct, forget, move, merge and confirm, with undo
    markdown    `lore export --markdown`: a read-only mirror, one file per topic"""
