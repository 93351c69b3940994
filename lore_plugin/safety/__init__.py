"""Keeping secrets and hostile input out: what passes here may reach the LLM, the database,
the logs or an export.

    redact          every text passes through redact() before an LLM or the database sees it
    secret_tokens   provider tokens that name themselves by a fixed prefix
    secret_phrases  passphrases, connection-string fields, command lines, credentials in prose
    secret_context  is this name a secret's name, does this value look like one
    frame           recalled text shown to the model: normalised, no tag of its own, framed
    importcheck     the rows of a `lore import` file, checked before any reaches the database
    logs            the log files every entry point writes, redacted line by line"""
