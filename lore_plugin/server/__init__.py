"""The MCP server: five thin, typed tools over the memory engine, spoken over stdio.
Run as `python -m lore_plugin.server` (what `.mcp.json` starts through scripts/lore-launch).

    tool_schema  the tools' arguments and answers, without the mcp SDK
    tools        the Service behind the tools, the server, and main()

Only this package imports mcp."""

from .tools import Service, build_server, main

__all__ = ["Service", "build_server", "main"]
