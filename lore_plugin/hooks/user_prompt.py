"""The UserPromptSubmit hook's work: ask the running memory service (or an in-process MCP
server) for memory that matches the prompt, fall back to keyword search alone when none
answers in time, and never inject the same fragment twice in one session.

The first path imports only os, json and socket (prompt_socket): the model and the vector
index stay in the service. The hook never starts one (the session's MCP front has started it
at the session's start, and a cold start would not fit in the hook's time anyway): when none
answers, the fallback opens the database read-only (apsw) and judges by words; it never
loads the model."""

from __future__ import annotations

import os

SOCKET_TIMEOUT = 0.25  # seconds for the whole exchange with the servers
MAX_PROMPT = 4000  # as prompt_recall.MAX_PROMPT, without importing it on the fast path
SESSIONS_DIR = "sessions"  # per-session records of what was injected
SEEN_SUFFIX = ".recalled"
KEEP_RECORDS_SECS = 7 * 86400.0


def _record_path(home: str, session: str) -> str:
    return os.path.join(home, SESSIONS_DIR, session + SEEN_SUFFIX)


def seen_ids(home: str, session: str) -> set[str]:
    """Fragment ids already injected in this session (none without a session id)."""
    if not session:
        return set()
    try:
        with open(_record_path(home, session), encoding="ascii", errors="replace") as fh:
            return {line.strip() for line in fh.read(1 << 20).splitlines() if line.strip()}
    except OSError:
        return set()


def remember(home: str, session: str, ids: list[str]) -> None:
    """Appends to the session's record (0600); a new record also clears week-old ones."""
    if not session or not ids:
        return
    folder = os.path.join(home, SESSIONS_DIR)
    path = _record_path(home, session)
    new = not os.path.exists(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="ascii") as fh:
        fh.write("".join(f"{i}\n" for i in ids))
    if new:
        _sweep(folder)


def _sweep(folder: str) -> None:
    import time

    cutoff = time.time() - KEEP_RECORDS_SECS
    try:
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if name.endswith(SEEN_SUFFIX) and os.stat(path).st_mtime < cutoff:
                os.unlink(path)
    except OSError:  # a record another session removed first, or none to read
        pass


def by_keywords(db_path: str, prompt: str, seen: set[str]) -> dict:
    """No server answered: FTS5 alone, judged by how much of the prompt a fragment holds."""
    if not os.path.exists(db_path):
        return {"context": None, "ids": []}
    from ..recall.prompt_recall import compose, strong_by_words
    from ..store import Store

    store = Store(db_path, readonly=True)
    try:
        text, ids = compose(strong_by_words(store, prompt, seen), store=store)
    finally:
        store.close()
    return {"context": text, "ids": ids}


def prompt_context(prompt: str, session: str, home: str, db_path: str,
                   timeout: float = SOCKET_TIMEOUT, cwd: str | None = None) -> str | None:
    """The additionalContext for this prompt, or None when nothing strong and new matches."""
    from ..recall.prompt_socket import ask

    prompt = prompt[:MAX_PROMPT]  # the rest would only cost time (prompt_recall searches no more)
    seen = seen_ids(home, session)
    # The folder: the memory service serves every session, and ranks for this one's project
    # and reads this repository's team space.
    request = {"prompt": prompt, "seen": sorted(seen), "cwd": cwd}
    answer = ask(home, db_path, request, timeout)
    if answer is None or answer.get("busy"):
        answer = by_keywords(db_path, prompt, seen)
    text, ids = answer.get("context"), answer.get("ids")
    if not isinstance(text, str) or not text or not isinstance(ids, list) or not ids:
        return None
    from ..safety.frame import reframed

    text = reframed(text)  # a server from before the frame was neutralised may answer
    if text is None:
        return None
    remember(home, session, [i for i in ids if isinstance(i, str) and i.isalnum()])
    return text
