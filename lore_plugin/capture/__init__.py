"""From a Claude Code transcript to knowledge in memory, exactly once.

    lines       which transcript lines are the human's requests, cheaply
    transcript  a JSONL transcript from a byte offset → conversational turns
    batches     how unread turns are cut into extraction calls
    extract     the extraction contract: the prompt, the tool, validation
    ingest      transcript delta → knowledge, with its watermark in one transaction
    history     the conversations from before Lore's first run
    jobs        the worker queue: how many detached workers may run at once
    usefulness  which recalled fragments the assistant went on to use
    patterns    the rule of three: failures that recur across sessions"""
