"""``fairshared undo``: the way back.  Takes back everything the daemon wrote, in any push mode,
from its push state (:mod:`fairshared.takeback` says what each mode gets back).

Shows what it would do unless ``--apply``; holds the state directory's lock while it runs, so it
refuses while a daemon runs on the same state (and no daemon starts meanwhile); what was taken back
leaves the push state, so a second run finds nothing left to do.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from ..model import InputError
from ..plan import PushState
from ..records import PushAction
from ..takeback import Takeback, plan_takeback

WHAT = {"site_factor": "SiteFactor", "nice": "Nice", "release": "release (recalculated again)"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "undo",
        help="take back everything the daemon wrote (SiteFactor, nice, fixed priorities, association "
        "priorities), from its push state",
        description="The way back. Reads the daemon's push state and takes back what it wrote: SiteFactor "
        "back to 0, each job owner's own nice, priorities the daemon fixed released (scontrol release), "
        "association priorities back to what they were (or cleared). Values somebody changed since are "
        "left alone. Without --apply it only shows what it would do. Refuses while a daemon runs on the "
        "same state directory; safe to run twice.",
    )
    p.add_argument("--config", metavar="FILE", help="the daemon's TOML configuration (for state.directory "
                   "and source); default: built-in defaults")
    p.add_argument("--state-dir", metavar="DIR", help="the daemon's state directory (default: state.directory, "
                   "else $STATE_DIRECTORY, else ./fairshared-state)")
    p.add_argument("--demo", action="store_true",
                   help="against a fresh built-in simulated cluster (its own, in this process: not a "
                        "running demo daemon's, whose cluster lives in that daemon; for trying the "
                        "command on a demo daemon's stopped state)")
    p.add_argument("--apply", action="store_true", help="do it (default: show what would be done)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.set_defaults(func=cmd_undo)


def cmd_undo(args: argparse.Namespace) -> int:
    from ..daemon import statefiles
    from ..daemon.config import load_config
    from ..daemon.runner_assoc import apply_takeback
    from ..daemon.wiring import make_assoc_writer, make_source_and_updater, state_dir
    config = load_config(args.config)
    directory = Path(args.state_dir) if args.state_dir else state_dir(config, args.demo)
    file = directory / "push-state.json"
    if not directory.is_dir():
        raise InputError("no such directory: nothing was pushed from here", f"state directory {directory}")
    lock = statefiles.lock(directory / "fairshared.lock", "state directory lock")  # a running daemon: refused
    try:
        data = statefiles.read_json(file)
        state = PushState("off") if data is None else PushState.load(data)
        if not state:
            _say(args, state, Takeback(state.mode), applied=False, left=state)
            return 0
        # the report is stdout's: log lines (e.g. "pyslurm unavailable") go to stderr meanwhile
        with contextlib.redirect_stdout(sys.stderr):
            source, updater = make_source_and_updater(config, args.demo)
            writer = make_assoc_writer(config, source)
            snap = source.snapshot(details=state.mode == "priority")  # priority: each job's fixed flag
            rows = writer.read(snap.cluster) if state.assocs else None
            tb = plan_takeback(state, snap.jobs, rows)
        if not args.apply:
            _say(args, state, tb, applied=False, left=state)
            return 0
        with contextlib.redirect_stdout(sys.stderr):
            failed_jobs, failed_assocs, errors = apply_takeback(tb, updater, writer, snap.cluster)
        left = tb.left(state, failed_jobs, failed_assocs)
        statefiles.write_atomic(directory, "push-state.json", json.dumps(left.to_dict()).encode())
        _say(args, state, tb, applied=True, left=left, errors=errors)
        return 1 if left else 0
    finally:
        os.close(lock)


def _job_line(a: PushAction) -> str:
    what = WHAT[a.field] if a.field == "release" else f"{WHAT[a.field]} {a.old} -> {a.new}"
    return f"  job {a.job_id} ({a.account}/{a.user}): {what}"


def _say(args, state: PushState, tb: Takeback, *, applied: bool, left: PushState, errors=()) -> None:
    if args.format == "json":
        print(json.dumps({
            "mode": state.mode, "applied": applied,
            "jobs": [{"job_id": a.job_id, "field": a.field, "old": a.old, "new": a.new} for a in tb.job_actions],
            "associations": [{"id": a.id, "account": a.account, "user": a.user, "partition": a.partition,
                              "old": a.old, "new": a.new} for a in tb.assoc_actions],
            "left_alone": tb.left_alone, "gone": tb.gone, "left": len(left.jobs) + len(left.assocs),
            "errors": list(errors)}, indent=2))
        return
    if not state:
        print("Nothing to take back: the push state holds no value this daemon wrote.")
        return
    verb = "Took back" if applied else "Would take back"
    print(f"{verb} what push mode {state.mode} wrote: {len(tb.job_actions)} job update(s), "
          f"{len(tb.assoc_actions)} association priorit{'y' if len(tb.assoc_actions) == 1 else 'ies'}.")
    for a in tb.job_actions:
        print(_job_line(a))
    for assoc in tb.assoc_actions:
        new = "cleared (inherits its parent's)" if assoc.new is None else str(assoc.new)
        print(f"  association {assoc.id} ({assoc.account}/{assoc.user}"
              f"{'/' + assoc.partition if assoc.partition else ''}): Priority {assoc.old} -> {new}")
    if tb.left_alone or tb.gone:
        print(f"Left alone: {tb.left_alone} changed by somebody since; {tb.gone} ended or removed.")
    for e in errors:
        print(f"error: {e}")
    if not applied:
        print("Run with --apply to do it.")
    elif left:
        print(f"{len(left.jobs) + len(left.assocs)} could not be taken back; run again to retry.")
