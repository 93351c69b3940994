"""Claude Code's hooks: parse stdin, decide, detach, return. Run as
`python -m lore_plugin.hooks session-start|user-prompt|stop|session-end < payload.json`.

    dispatch     each event's handler and the detached worker; the Stop path imports almost nothing
    brief        the SessionStart memory brief
    user_prompt  the UserPromptSubmit hook's recall, through a running server or on its own"""

from .dispatch import main

__all__ = ["main"]
