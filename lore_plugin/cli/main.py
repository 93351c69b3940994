"""The `lore` command. It turns domain errors into one-line messages and exit codes;
tracebacks go to the log file only."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..core.config import Settings, load_settings
from ..core.errors import LoreError
from ..recall import render
from .opening import fill_cue_vectors, open_memory

log = logging.getLogger("lore.cli")


def first_sentence(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    for stop in (". ", "? ", "! ", "\n"):
        if stop in text[: limit + 1]:
            return text[: text.index(stop) + 1].rstrip(".")
    return render.clip(text, limit)


def cmd_remember(args: argparse.Namespace, settings: Settings) -> int:
    memory = open_memory(settings)
    content = " ".join(args.text)
    summary = args.summary or first_sentence(content)
    parent, depth = args.parent, args.depth
    if args.topic:
        store = memory.writer
        topic_id = store.find_by_summary(args.topic, depth=0)
        if topic_id is None:
            topic_id = memory.store(args.topic, args.topic, depth=0, source="remember").id
            print(f"new topic [{render.short_id(topic_id)}] {args.topic}")
        parent, depth = topic_id, 1
    from ..core.cues import clean_cues
    from ..recall.storing import store_knowledge

    stored = store_knowledge(memory, content, summary, parent, depth, source="remember",
                             cues=clean_cues(args.cues))
    if args.cues:  # stored in-process: the judge's cue vectors now, not at the next service
        fill_cue_vectors(memory)
    frag = stored.fragment
    for made in stored.created:
        print(f"new {render.depth_name(made.depth)} [{render.short_id(made.id)}] {made.summary}")
    where = f" under [{render.short_id(frag.parent_id)}]" if frag.parent_id else ""
    verb = "already known, reinforced" if stored.duplicate else "remembered"
    print(f"{verb} [{render.short_id(frag.id)}] {frag.summary}{where}")
    return 0


def cmd_recall(args: argparse.Namespace, settings: Settings) -> int:
    query = " ".join(args.query)
    if not args.tree:  # the service's warm model and index, when one can be had
        from .service import recall_text

        text = recall_text(settings, query, args.depth, args.limit)
        if text is not None:
            print(text)
            return 0
    memory = open_memory(settings)
    recall = memory.query(query, depth=args.depth, limit=args.limit)
    print(render.recall_text(query, args.depth, recall.fragments, recall.keyword_only))
    if args.tree and recall.fragments:
        top = recall.fragments[0].fragment
        root = memory.reader.ancestors(top.id)[-1:] or [top.id]
        print("\n" + render.tree_text(memory.subtree(root[0], max_depth=8)))
    return 0


def cmd_explore(args: argparse.Namespace, settings: Settings) -> int:
    memory = open_memory(settings)
    tree = memory.explore(" ".join(args.topic), max_depth=args.max_depth)
    print(render.tree_text(tree) if tree else "No topic matches; try `lore topics`.")
    return 0


def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    print(render.topics_text(open_memory(settings).topics()))
    return 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    memory = open_memory(settings)
    frag = memory.get(args.id)
    print(render.fragment_line(frag, content=False))
    print(f"id: {frag.id}\ncreated: {render.when(frag.created_at)}  accessed: "
          f"{frag.access_count}x  importance: {frag.importance:.2f}  "
          f"decay: {frag.decay_rate:.3f}/day  project: {frag.project or '-'}")
    if frag.source_session:
        print(f"source session: {frag.source_session}")
    print(f"\n{frag.content}\n")
    parent = memory.parent(frag.id)
    if parent:
        print(render.neighbours_text("parent", [parent]))
    print(render.neighbours_text("children", memory.children(frag.id)))
    assoc = memory.associations(frag.id)
    print(render.neighbours_text("associations", [a[0] for a in assoc],
                                 [f"({k}, {w:.2f})" for _, k, w in assoc]))
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from ..maintenance.status import status_lines

    print("\n".join(status_lines(settings)))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "remember": cmd_remember, "recall": cmd_recall, "query": cmd_recall,
    "explore": cmd_explore, "topics": cmd_topics, "show": cmd_show, "status": cmd_status,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lore", description="Lore: long-term memory for Claude Code")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("remember", help="store a piece of knowledge")
    p.add_argument("text", nargs="+")
    p.add_argument("--summary", help="one line; defaults to the first sentence")
    p.add_argument("--topic", help="topic name (found or created); stores a concept under it")
    p.add_argument("--parent", help="parent fragment id (8+ characters)")
    p.add_argument("--depth", type=int, default=0, help="0 topic, 1 concept, 2 fact, 3 detail")
    p.add_argument("--cue", action="append", default=[], dest="cues",
                   help="a phrase it may later be asked for by (repeat for more; searched, "
                        "never shown)")
    for name in ("recall", "query"):
        p = sub.add_parser(name, help="search memory at one depth")
        p.add_argument("query", nargs="+")
        p.add_argument("--depth", type=int, default=1)
        p.add_argument("--limit", type=int, default=10)
        p.add_argument("--tree", action="store_true", help="also print the best match's tree")
    p = sub.add_parser("explore", help="the subtree of the best-matching topic")
    p.add_argument("topic", nargs="+")
    p.add_argument("--max-depth", type=int, default=2)
    sub.add_parser("topics", help="every topic with its size and relevance")
    p = sub.add_parser("show", help="one fragment with its neighbours")
    p.add_argument("id")
    sub.add_parser("status", help="database, model, LLM, ingestion and consolidation state")
    from .hub import add_hub_parsers
    from .maint import add_maint_parsers
    from .ops import add_op_parsers
    from .service import add_service_parsers
    from .share import add_share_parsers  # issue 29
    from .team import add_team_parsers

    add_op_parsers(sub, COMMANDS)
    add_maint_parsers(sub, COMMANDS)
    add_service_parsers(sub, COMMANDS)
    add_hub_parsers(sub, COMMANDS)
    add_team_parsers(sub, COMMANDS)
    add_share_parsers(sub, COMMANDS)
    return parser


def main(argv: list[str] | None = None) -> int:
    settings = load_settings()
    from ..core.private import lock_down
    from ..safety.logs import setup_logging

    lock_down(settings.home, settings.db_path)
    setup_logging(settings.log_dir, "cli")
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    try:
        return COMMANDS[args.command](args, settings)
    except LoreError as exc:
        print(f"lore: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lore: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback in the user's face; the log has it
        log.exception("lore %s failed", args.command)
        print(f"lore: {args.command} failed: {type(exc).__name__}: {exc} "
              f"(details in {Path(settings.log_dir) / 'cli.log'})", file=sys.stderr)
        return 1
    finally:
        log.info("lore %s took %.3fs", args.command, time.monotonic() - started)

