"""The LLM seam: one method, `call_tool`, that forces one tool and returns its input.

    client      the seam, the anthropic SDK client, the fake, and which one to use
    claude_cli  the `claude -p` backend, for users without an API key
    budget      request and token caps every call passes
    usage       the token ledger: what each call cost, what the day has spent

Only this package imports anthropic."""
