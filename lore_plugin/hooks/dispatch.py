"""Claude Code hook entry points: parse stdin, decide, detach, return.

    python -m lore_plugin.hooks session-start|user-prompt|stop|session-end  < payload.json

Imports nothing heavy (no anthropic, mcp, fastembed or numpy): Stop runs after every turn,
so its time is the user's. Slow work goes to a double-forked worker whose stdio is not
Claude Code's (Claude Code waits for a hook's stdout and stderr to close). Every failure is
caught at this outermost edge, logged, and turned into exit code 0.

The Stop path is leaner still: it reads two config values (configfile), one watermark
(store/peek.py, apsw alone) and counts pending requests (lines), without the dataclass-based
Settings and value types, the Store's mixins or even pathlib (os.path does): with them its
imports cost more than the rest of its work."""

from __future__ import annotations

import os
import stat
import sys
import time

from ..core.lean_json import loads

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ..core.config import Settings
    from ..core.types import HookEvent

MAX_STDIN = 1 << 20
# A session id names files and rows: 1-128 of these, checked without re (see lean_json).
_SESSION_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _payload(raw: bytes) -> tuple[dict, str]:
    """The hook's JSON object and its validated session id ('' when absent or odd)."""
    data = loads(raw or b"{}")
    if not isinstance(data, dict):
        raise ValueError("hook payload is not a JSON object")
    session = str(data.get("session_id") or "")
    valid = 0 < len(session) <= 128 and _SESSION_CHARS.issuperset(session)
    return data, session if valid else ""


def parse_event(raw: bytes, name: str, env: Mapping[str, str] | None = None,
                log_dir: Path | None = None) -> HookEvent:
    from ..core.types import HookEvent

    data, session = _payload(raw)
    transcript, problem = _valid_transcript(data.get("transcript_path"),
                                            os.environ if env is None else env)
    if problem and log_dir is not None:
        _log_note(log_dir, name, problem)
    return HookEvent(
        event=str(data.get("hook_event_name") or name), session_id=session,
        transcript_path=transcript,
        cwd=data.get("cwd") if isinstance(data.get("cwd"), str) else None,
        source=data.get("source"), reason=data.get("reason"),
        stop_hook_active=bool(data.get("stop_hook_active")))


def _valid_transcript(value: object, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the path, None) when `value` names a regular .jsonl file inside Claude Code's projects
    folder, symlinks resolved; else (None, why not), the reason None when the file simply
    does not exist yet (a new session's SessionStart comes before its first line). The path
    is returned as given, not resolved: watermarks are keyed by it."""
    if value is None:
        return None, None
    if (not isinstance(value, str) or "\x00" in value or len(value) > 4096
            or not value.endswith(".jsonl") or not os.path.isabs(value)):
        return None, f"transcript_path ignored: not an absolute .jsonl path: {value!r:.200}"
    from ..core.configfile import claude_projects_dir

    root = os.path.realpath(claude_projects_dir(env))
    real = os.path.realpath(value)
    if not real.startswith(root + os.sep):
        return None, f"transcript_path ignored: outside {root}: {value!r:.200}"
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            return None, f"transcript_path ignored: not a regular file: {value!r:.200}"
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"transcript_path ignored: {exc.strerror}: {value!r:.200}"
    return value, None


def _log_note(log_dir: str | Path, name: str, message: str) -> None:
    """One line in hooks.log for input that was ignored; never raises."""
    try:
        os.makedirs(log_dir, exist_ok=True)
        with open(os.path.join(log_dir, "hooks.log"), "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {os.getpid()} {name}: {message}\n")
    except OSError:
        pass


def start_job(home: str, max_workers: int, *args: str) -> None:
    """Queues the job, and starts a worker for it when one of the max_workers slots is free;
    otherwise a running worker takes it (capture/jobs.py)."""
    from ..capture.jobs import enqueue, try_slot

    enqueue(home, list(args))
    slot = try_slot(os.path.join(home, "locks"), max_workers)
    if slot is None:
        return
    try:
        spawn_worker(os.path.join(home, "logs"), "drain", "--slot-fd", str(slot), keep_fd=slot)
    finally:
        os.close(slot)  # the worker holds its own copy of the locked file now


def spawn_worker(log_dir: str | Path, *args: str, keep_fd: int | None = None) -> None:
    """Starts `python -m lore_plugin.worker ARGS` fully detached: double fork + setsid, so it
    survives Claude Code killing the hook's process tree, with stdio on /dev/null and a log.
    keep_fd (a worker slot's lock) is the one other descriptor the worker inherits."""
    cmd = [sys.executable, "-m", "lore_plugin.worker", *args]
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, "worker.out")
    if os.name != "posix":  # pragma: no cover - Windows
        import subprocess

        flags = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
        if keep_fd is not None:  # no descriptor passing here: the worker takes a slot itself
            cmd = [a for a in cmd if a not in ("--slot-fd", str(keep_fd))]
        with open(log_path, "ab") as log_file:
            subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                             creationflags=flags, close_fds=True)
        return
    pid = os.fork()
    if pid == 0:  # child: new session, fork again, exit so the grandchild is orphaned
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDONLY)
                out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.dup2(null, 0)
                os.dup2(out, 1)
                os.dup2(out, 2)
                if keep_fd is None:
                    os.closerange(3, 1024)
                else:
                    os.closerange(3, keep_fd)
                    os.closerange(keep_fd + 1, 1024)
                    os.set_inheritable(keep_fd, True)
                os.execv(sys.executable, cmd)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _watermark(db_path: str, transcript: str) -> int:
    if not os.path.exists(db_path):
        return 0
    from ..store.peek import watermark

    offset = watermark(db_path, transcript)
    if offset is not None:
        return offset
    from ..store import Store  # another schema version, or busy: Store migrates or waits

    store = Store(db_path, readonly=True)
    try:
        return store.watermark(transcript)
    finally:
        store.close()


def stop_due(raw: bytes, env: dict[str, str]) -> tuple[dict, list[str]] | None:
    """The Stop hook's question: do the transcript's unread complete lines hold a batch?
    Returns the config values and the worker's job when they do: the Stop path never
    needs the full settings."""
    from ..capture.lines import count_turns_fast
    from ..core.configfile import read_values

    data, session = _payload(raw)
    values, _ = read_values(env)
    transcript, problem = _valid_transcript(data.get("transcript_path"), env)
    if problem:
        _log_note(os.path.join(values["home"], "logs"), "stop", problem)
    if not transcript:
        return None
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    if not _may_read(values, cwd):
        return None
    pending = count_turns_fast(transcript, _watermark(values["db_path"], transcript))
    if pending < values.get("batch_size", 20):
        return None
    return values, ["ingest", transcript, "--session", session, *(["--cwd", cwd] if cwd else [])]


def _may_read(values: dict, cwd: str | None) -> bool:
    """The user's off switches, asked before anything of the transcript is read."""
    from ..core.controls import off_reason_values, project_ignored_values

    if off_reason_values(values.get("ingestion_enabled", True), values["home"]):
        return False
    return not project_ignored_values(cwd, values.get("ignore_projects", ()))


def prompt_output(raw: bytes, env: dict[str, str]) -> str | None:
    """UserPromptSubmit: strongly matching memory as additionalContext, or nothing. Like Stop
    it runs before every turn, so it reads plain config values, not the Settings."""
    from ..core.configfile import read_values

    data, session = _payload(raw)
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    values, _ = read_values(env)
    if not values.get("recall_on_prompt", True):
        return None
    from .user_prompt import prompt_context

    cwd = data.get("cwd")
    context = prompt_context(prompt, session, values["home"], values["db_path"],
                             cwd=cwd if isinstance(cwd, str) else None)
    if not context:
        return None
    import json

    return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                              "additionalContext": context}})


def on_session_end(event: HookEvent, settings: Settings) -> None:
    from ..core.controls import off_reason, project_ignored

    if off_reason(settings) or project_ignored(settings, event.cwd):
        return
    if event.transcript_path and os.path.exists(event.transcript_path):
        start_job(str(settings.home), settings.max_workers, "ingest", event.transcript_path,
                  "--session", event.session_id, *(["--cwd", event.cwd] if event.cwd else []))


def on_session_start(event: HookEvent, settings: Settings) -> str | None:
    from pathlib import Path

    from ..capture.history import claude_projects_dir, hint_once, record_if_first_run
    from ..core.private import lock_down

    lock_down(settings.home, settings.db_path)  # once a session: repair what umask 022 made
    projects = claude_projects_dir()
    if event.transcript_path:
        projects = Path(event.transcript_path).parent.parent  # ~/.claude/projects
    hint = None
    try:
        # Here, before any worker starts: what exists now is history, which no hook reads.
        # Should this fail, the workers try again before they read anything.
        record_if_first_run(settings, projects)
        hint = hint_once(settings) if settings.session_brief else None
    except Exception as exc:  # noqa: BLE001 - the brief below still says what is wrong
        _log_failure(settings, "session-start (recording history)", exc)
    start_job(str(settings.home), settings.max_workers, "sweep", "--projects", str(projects))
    if not settings.session_brief:
        return None
    from .brief import session_brief

    cwd = event.cwd if event.cwd and os.path.isabs(event.cwd) else None

    def refresh() -> None:  # no memory service answered: one reads the hub part for next time
        start_job(str(settings.home), settings.max_workers, "spaces-brief", *([cwd] if cwd else []))

    return session_brief(settings, event.cwd, [hint] if hint else [], refresh)


def run(name: str, raw: bytes, settings: Settings) -> str | None:
    event = parse_event(raw, name, log_dir=settings.log_dir)
    if name == "session-end":
        on_session_end(event, settings)
    elif name == "session-start":
        brief = on_session_start(event, settings)
        if brief:
            import json

            return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                      "additionalContext": brief}})
    return None


def _log_failure(settings: Settings | None, name: str, exc: BaseException) -> None:
    try:
        import traceback

        log_dir: str | Path
        if settings:
            log_dir = settings.log_dir
        else:  # settings never loaded: the same home they would have named
            from ..core.configfile import read_values

            log_dir = os.path.join(read_values(dict(os.environ))[0]["home"], "logs")
        from ..safety.redact import redact

        _log_note(log_dir, name, redact(f"failed: {type(exc).__name__}: {exc}\n"
                                        f"{traceback.format_exc()}"))
    except Exception:  # nowhere to log: stay silent rather than break the session
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0] if argv else "unknown"
    if os.environ.get("LORE_DISABLE", "") not in ("", "0"):  # as scripts/lore-launch reads it
        return 0  # Lore's own nested `claude -p`: never feed it back into memory
    os.umask(0o077)  # before anything is created: the worker's log, a lock, the database
    settings = None
    try:
        raw = sys.stdin.buffer.read(MAX_STDIN)
        if name == "stop":
            due = stop_due(raw, dict(os.environ))
            if due is not None:
                values, args = due
                start_job(values["home"], values.get("max_workers", 2), *args)
            return 0
        if name == "user-prompt":
            output = prompt_output(raw, dict(os.environ))
            if output:
                sys.stdout.write(output)
                sys.stdout.flush()
            return 0
        from ..core.config import load_settings

        settings = load_settings()
        output = run(name, raw, settings)
        if output:
            sys.stdout.write(output)
            sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the session
        _log_failure(settings, name, exc)
    return 0

