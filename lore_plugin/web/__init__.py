"""`lore ui`: a local web viewer to browse, search and curate memory.

    security   account, Host, cookie, one-time code and cross-site checks before every route
    peer       which account opened a loopback connection (Linux's /proc/net/tcp)
    html       escaping, the layout, the stylesheet and the little script
    pages      the topic tree, search and the fragment page (reads)
    activity   sessions, parked batches, LLM use, consolidation, doctor, the undo journal
    actions    the curation writes (POST only), through curation.Curator
    viewer     what the routes share, and the one-thread-at-a-time rule
    app        routes, error pages, and serve()

Starlette and uvicorn are imported here only: the hooks and the MCP server never load them."""
