"""The hub's named errors: each says in one line what is wrong and what fixes it. The CLI
prints the message and exits non-zero; nothing local is touched when one is raised."""

from __future__ import annotations

from ..core.errors import LoreError, SchemaTooNew


class HubError(LoreError):
    """Anything the hub refuses or cannot do."""


class HubUnreachable(HubError):
    """Wrong host, port, database, user or password, or the server is down."""


class HubUnavailable(HubError):
    """The connection dropped mid-operation; the transaction was rolled back, nothing kept."""


class NoPgvector(HubError):
    """The server lacks the pgvector extension."""


class HubSchemaTooNew(HubError, SchemaTooNew):
    """The hub's schema was written by a newer Lore."""


class UnknownSpace(HubError):
    """The space named does not exist on the hub."""


class ModelMismatch(HubError):
    """The space's vectors come from another embedding model than this client's."""


class HubAccessDenied(HubError):
    """The database refused the role: not a member of the space, a read-only member writing,
    not an owner changing members (issue 29's row-level security)."""
