"""The MCP surface, spoken over stdio. Run as `python -m lore_plugin.server` (what `.mcp.json`
starts through scripts/lore-launch).

    front      the thin front each session runs: the protocol by hand, tools forwarded to
               the memory service (service/), standard library only
    tool_list  tool_list.json, the front's tool list generated from the SDK's definitions
    local      the front's fallback: the tools in its own process
    tools      the in-process SDK server (LORE_SERVICE=off, no Unix sockets), and the SDK
               definitions of the five tools

Only this package imports mcp, and only tools.py and tool_list.py. This __init__ imports
nothing, so the front starts without the SDK."""
