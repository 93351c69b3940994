"""`Store`: one connection to the memory database with every concern's methods, each concern
a mixin in its own module (see the package's docstring for the list)."""

from __future__ import annotations

from .backup import Backup
from .bookkeeping import Bookkeeping
from .cue_vector_rows import CueVectorRows
from .curation import Curation
from .decay import Decay
from .forgetting import Forgetting
from .fragments import Fragments
from .history import History
from .keywords import Keywords
from .loops import Loops
from .merging import Merging
from .terms import Terms
from .upkeep import Upkeep


class Store(Curation, Merging, Forgetting, Fragments, Keywords, Terms, History, Bookkeeping,
            Upkeep, Backup, Decay, Loops, CueVectorRows):
    """One connection to the memory database with every storage method (see the modules)."""
