"""The memory service: one warm process per Lore home that holds the embedding model, the
vector index and the write path once, for every session's MCP front, the per-prompt hook,
the CLI and the viewer. Run as `python -m lore_plugin.service` (clients start it on demand).

    protocol     the request shape, versions, names and limits (standard library only)
    client       find, start and ask the service; Unavailable when it cannot be had
    daemon       the process: lock, private socket, idle exit, drain for upgrades
    ops          what it answers: the tools, the per-prompt recall, `lore recall`, status
    engine       one Memory behind the tools: its lock, busy retries, warm-up
    answers      the five tools' answers, used in the service and in-process alike
    tool_schema  the tools' arguments and answers (pydantic), without the mcp SDK

The package's __init__ imports nothing: the hook and the front import protocol and client
alone."""
