"""Which project a heading belongs to, for placement (storing._fits): a note stored in a
project goes only under that project's headings, and one stored outside any project only
under headings that belong to none.

What "belongs" means: the project of the heading's *topic* (its depth-0 ancestor), not the
heading's own `project` column. Every fragment's column is the project of the session that
stored it (Memory.store and capture/ingest.py both write `memory.project`; the extractor's
`scope`, issue 29, only decides what a team space may see, never the column). A heading can
therefore carry another session's project than its topic: extraction files a new concept
under an existing topic it matches, of any project (capture/known.match_topic), and before
this rule placement put a lumen session's concepts under "Project atlas". The topic is what
a reader sees and what a note's path says ("Project atlas › ..." gave a lumen note the word
"atlas"), so it is the topic that decides; a concept of the wrong project under a topic of
the right one is then still a home for that topic's notes, and never for another project's.

A project of "/" (a session at the file system's root) counts as none, as the placed topic's
name does (storing._topic_name)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..core.types import Fragment
from ..store import Store
from .terms import keyword_terms


def project_of(project: str | None) -> str | None:
    """The project a fragment or a memory names, None for none (None, "" and "/")."""
    return project if project and project != "/" else None


def topic_projects(store: Store, headings: Sequence[Fragment]) -> dict[str, str | None]:
    """heading id -> the project of its topic, for every heading whose topic is found. The
    ancestors are climbed one level at a time for all headings together: a read a level."""
    above: dict[str, str] = {}  # heading id -> its ancestor reached so far
    steps: dict[str, int] = {}  # levels still to climb to reach the topic
    for heading in headings:
        if heading.depth > 0:  # the query's hits come with their parent_id filled
            above[heading.id] = heading.parent_id or heading.id
            steps[heading.id] = heading.depth - (1 if heading.parent_id else 0)
    while climbing := {h: a for h, a in above.items() if steps[h] > 0}:
        parents = store.parent_ids(list(set(climbing.values())))
        for hid, ancestor in climbing.items():
            if ancestor in parents:
                above[hid] = parents[ancestor]
                steps[hid] -= 1
            else:  # cut off from its topic: belongs to no topic, so to no project found
                del above[hid]
    tops = list(set(above.values()))
    projects = {fid: frag.project for fid, frag in
                store.get_many(tops, with_text=False, with_parent=False).items()
                if frag.depth == 0} if tops else {}
    owned = {h.id: project_of(h.project) for h in headings if h.depth == 0}
    owned.update({h: project_of(projects[a]) for h, a in above.items() if a in projects})
    return owned


def project_names(project: str | None) -> frozenset[str]:
    """The words of a project's name, in lower case: the basename of its path or key and its
    parts ("lore-plugin" gives "lore-plugin", "lore" and "plugin"). A word every note of the
    project may say: it tells nothing of what a heading under it is about (storing._names),
    and it is a name, not a plural, whatever its ending (heading_names.subject_name)."""
    name = project_of(project)
    if name is None:
        return frozenset()
    terms = keyword_terms(os.path.basename(name.rstrip("/")).removesuffix(".git"))
    return frozenset([*terms, *(p for t in terms for p in re.split(r"[-_.]", t) if p)])
