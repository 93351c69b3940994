"""The operational `lore` commands: serving, ingestion, consolidation and maintenance.
Each handler imports its module lazily so `lore status` stays quick."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from .server import main as serve

    serve()
    return 0


def add_op_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    sub.add_parser("mcp", help="run the MCP server on stdio")
    commands["mcp"] = cmd_mcp
