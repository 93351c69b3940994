"""Logging set-up shared by every entry point: a rotating file under ~/.lore/logs, and
stderr only where a person is watching. stdout is never used (it is MCP's channel)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path


class RedactingFormatter(logging.Formatter):
    """Log lines pass through redact() too: an error message or a traceback can quote the text
    that was being processed, secrets included."""

    def format(self, record: logging.LogRecord) -> str:
        from .redact import redact

        return redact(super().format(record))


def setup_logging(log_dir: Path, name: str, stderr: bool = False,
                  level: int = logging.INFO) -> None:
    root = logging.getLogger()
    root.setLevel(level)
    fmt = RedactingFormatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            log_dir / f"{name}.log", maxBytes=2_000_000, backupCount=2, encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()  # a read-only home must not stop Lore from working
    handler.setFormatter(fmt)
    root.addHandler(handler)
    if stderr:
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(fmt)
        err.setLevel(logging.WARNING)
        root.addHandler(err)
