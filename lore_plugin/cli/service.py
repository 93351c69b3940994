"""`lore service start|stop|status`, and `lore recall` through the memory service when one
can be had: the warm model and index answer at once where the command alone would load them."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from ..core.config import Settings
from ..core.errors import LoreError

Handler = Callable[[argparse.Namespace, Settings], int]


def client(settings: Settings, wait: float | None = None):  # noqa: ANN201
    from ..core.project import project_key
    from ..service.client import ServiceClient

    return ServiceClient(str(settings.home), str(settings.db_path), project_key(os.getcwd()),
                         wait=wait)


def recall_text(settings: Settings, query: str, depth: int, limit: int) -> str | None:
    """The service's answer to `lore recall`, or None when no service can be had (the command
    then searches in-process, as it always has)."""
    from ..service.client import Unavailable

    service = client(settings)
    if not service.usable:
        return None
    try:
        answer = service.request("recall", {"query": query, "depth": depth, "limit": limit})
    except Unavailable:
        return None
    finally:
        service.close()
    if "error" in answer:
        raise LoreError(str(answer["error"]))
    text = answer.get("text")
    return text if isinstance(text, str) else None


def cmd_service(args: argparse.Namespace, settings: Settings) -> int:
    from ..service.client import Unavailable, announced
    from ..service.protocol import enabled

    info = announced(str(settings.home), str(settings.db_path))
    if args.action == "status":
        if info is None:
            print("memory service: not running" + ("" if enabled() else " (LORE_SERVICE=off)"))
            return 0
        state = client(settings, wait=5).request("status")
        print(f"memory service: pid {state.get('pid')}, version {state.get('version')}, "
              f"{'warm' if state.get('warm') else 'warming up'}, up {state.get('uptime')} s, "
              f"{state.get('answered')} requests, RSS {state.get('rss_mb')} MB")
        if state.get("journal"):  # a service older than the journal's status says nothing
            print(f"store journal: {state['journal']}")
        return 0
    if args.action == "stop":
        if info is None:
            print("memory service: not running")
            return 0
        from ..recall.prompt_socket import exchange

        exchange(info, {"op": "drain"}, time.monotonic() + 5)
        print(f"memory service {info.get('pid')}: draining, then it exits")
        return 0
    if not enabled():
        raise LoreError("the memory service is off (LORE_SERVICE=off) or needs Unix sockets")
    try:
        pid = client(settings).ready().get("pid")
    except Unavailable as exc:
        raise LoreError(f"the memory service did not start: {exc}") from exc
    print(f"memory service: running, pid {pid}")
    return 0


def add_service_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    p = sub.add_parser("service", help="the warm memory service every session shares")
    p.add_argument("action", choices=["start", "stop", "status"])
    commands["service"] = cmd_service
