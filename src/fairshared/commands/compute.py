"""``fairshared compute``: every association's fair-share columns, printed like ``sshare -a -l``."""

from __future__ import annotations

import argparse
import sys

from ..engine import ALGORITHMS, build_tree, compute
from ..engine.decide import decide
from ..inputs.priority_snapshot import save_inputs
from ..model import InputError, Snapshot
from ..output import COLUMNS, FORMATS, parse_columns, selected, write
from ..sources.slurm_cli import SlurmCli
from . import name_list
from . import dampening
from .common import add_source, load_inputs, parse_at


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compute",
        help="compute fair-share factors from an sshare dump or a snapshot and print them like sshare",
        description="Compute every association's fair-share columns (NormShares, NormUsage, EffectvUsage, "
        "FairShare, LevelFS) with the chosen algorithm and print them like `sshare -a -l`.",
    )
    add_source(p, required=True)
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the snapshot's PriorityFlags say, "
                   "else fair_tree)")
    p.add_argument("--dampening", type=dampening, metavar="D",
                   help="FairShareDampeningFactor for classic: a whole number 0..65535 as in slurm.conf, "
                   "0 refused by classic (default: the snapshot's, else 1)")
    p.add_argument("--priority-levels", type=_levels, metavar="L",
                   help="PriorityLevels for level_based, 1..16 (default: enough for the deepest association)")
    p.add_argument("--zero-shares-best", action="store_true",
                   help="level_based: give 0-share associations the best bucket, as Slurm 14.11.0-pre5 did "
                   "(by default they rank last)")
    p.add_argument("-o", "--format", type=_format, default=("table", None), metavar="STYLE|COL,COL",
                   help="output style: table (default), parsable or json; or, as sshare's --format, "
                   f"the columns to print by sshare's names in any case ({','.join(COLUMNS)})")
    p.add_argument("-P", "--parsable", action="store_true",
                   help="'|'-separated like `sshare -P` (the same as --format parsable; with columns too)")
    p.add_argument("-u", "--users", type=name_list, metavar="USER[,USER]",
                   help="as sshare -u: only these users' associations (the account rows stay)")
    p.add_argument("-A", "--accounts", type=name_list, metavar="ACCT[,ACCT]",
                   help="as sshare -A: only associations in these accounts (each account's row and its "
                   "users; its sub-accounts are accounts of their own)")
    p.add_argument("--at", type=parse_at, default="auto", metavar="WHEN",
                   help="with --demo: the moment the simulated cluster is shown at, as Unix seconds or an "
                   "ISO 8601 date-time (default: now)")
    p.add_argument("--usage", choices=["slurmctld", "accounting"], default="slurmctld",
                   help="with --source slurm: the raw usage slurmctld holds (default), or the one computed "
                   "from the accounting records (sacct) with slurmctld's own arithmetic")
    p.set_defaults(func=cmd_compute)


def load_input(args: argparse.Namespace) -> Snapshot:
    """compute's input: the live tree alone (jobs only when they are to be saved), or what
    sprio/explain/compare read from --demo, --snapshot or --from-sshare."""
    if args.source == "slurm" and not args.save_snapshot:
        snap = SlurmCli(timeout=args.timeout).snapshot(jobs=False)
        return snap.with_empty_details()
    return load_inputs(args)



def cmd_compute(args: argparse.Namespace) -> int:
    if args.usage == "accounting" and args.source != "slurm":
        raise InputError("--usage accounting needs --source slurm (it reads the job records with sacct)")
    if args.at != "auto" and not args.demo:
        raise InputError("compute --at goes with --demo (the other inputs are taken at their own time)")
    snap = load_input(args)
    if args.usage == "accounting":
        from .usage import replace_with_accounting

        snap = replace_with_accounting(snap, args.timeout)
    algorithm, params = decide(snap.settings, algorithm=args.algorithm, dampening=args.dampening,
                               priority_levels=args.priority_levels, zero_shares_best=args.zero_shares_best)
    tree = build_tree(snap.associations)
    result = compute(tree, algorithm, params)
    if args.save_snapshot:
        save_inputs(snap, args.save_snapshot, snap.evaluated_at, getattr(args, "snapshot_stdout", None))
    style, columns = args.format
    if args.parsable:
        style = "parsable"
    rows = selected(result, args.users, args.accounts) if args.users or args.accounts else None
    if rows is not None and (not rows or (args.users and not any(result.tree.is_user[i] for i in rows))):
        given = (("-u", args.users), ("-A", args.accounts))
        print("fairshared: no association matches " + " ".join(f"{f} {','.join(v)}" for f, v in given if v),
              file=sys.stderr)
    write(result, style, sys.stdout, rows, columns)
    return 0


def _format(text: str) -> tuple[str, list[str] | None]:
    """--format: an output style (table, parsable, json) or sshare's columns (Account,User,FairShare)."""
    if text.strip().lower() in FORMATS:
        return text.strip().lower(), None
    try:
        return "table", parse_columns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or a style: {', '.join(FORMATS)})") from None


def _levels(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= v <= 16:
        raise argparse.ArgumentTypeError(f"{v} is outside 1..16")
    return v
