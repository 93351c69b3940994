"""The small tree of named errors. Tools raise them, the CLI maps them to messages."""


class LoreError(Exception):
    """Base of every error Lore raises on purpose. Its message is meant for a human."""


class NotFound(LoreError):
    pass


class AmbiguousId(LoreError):
    pass


class InvalidInput(LoreError):
    pass


class SchemaTooNew(LoreError):
    pass


class ConfigError(LoreError):
    pass


class LLMUnavailable(LoreError):
    """No API key and no claude CLI: extraction must wait."""


class LLMError(LoreError):
    """The LLM call failed or answered something unusable; the batch is retried later."""


class BudgetExceeded(LLMError):
    """The hourly request cap was reached; try again later."""


class LLMTransient(LLMError):
    """Rate limited, overloaded, timed out or unreachable, still after retries: nothing was
    wrong with the request, so the batch is not to blame (never counted toward parking)."""


class AnswerTruncated(LLMError):
    """The answer was cut off at max_tokens: the same prompt would be cut again, so the
    caller asks again with less (a smaller slice)."""
