"""The tool list, the instructions and the capabilities the thin front (front.py) announces,
generated from the SDK's own definitions (tools.build_server) into tool_list.json, so that the
front answers `initialize` and `tools/list` exactly as the in-process server does without
importing the SDK (0.6 s and ~50 MB of a 70 MB budget; bench/README.md). A test fails when the
file and the SDK's definitions differ: `python -m lore_plugin.server.tool_list` rewrites it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("tool_list.json")


def generate() -> dict[str, Any]:
    import anyio
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    from ..recall.memory import Memory
    from .tools import INSTRUCTIONS, Service, build_server

    service = Service(Memory(Path("/nonexistent/lore-tool-list.db"), None))  # never opened
    try:
        server = build_server(service)
        tools = anyio.run(server.list_tools)
        options = server._lowlevel_server.create_initialization_options()
    finally:
        service.close()
    capabilities = options.capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not capabilities.get("extensions"):
        capabilities.pop("extensions", None)  # the SDK's stdio runner leaves an empty map out
    return {"protocol_versions": list(HANDSHAKE_PROTOCOL_VERSIONS),
            "latest": LATEST_HANDSHAKE_VERSION,
            "server_name": options.server_name,
            "capabilities": capabilities,
            "instructions": INSTRUCTIONS,
            "tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]}


def main() -> None:
    PATH.write_text(json.dumps(generate(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
