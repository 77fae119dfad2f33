"""``fairshared sprio``: Slurm's ``sprio -l`` from our own computation.

The formulas are :mod:`fairshared.priority`'s, the fair-share factor our engine's, optionally
under another fair-share algorithm than the cluster's.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..engine import ALGORITHMS
from ..engine.ranks import fairshare_of
from ..explain_common import details
from ..priority_sprio import SprioRow, render_sprio, render_sprio_weights, render_sprio_weights_long, sprio
from . import job_id_list, name_list
from .common import add_at, add_source, evaluate, save_if_asked


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sprio",
        help="job priorities like `sprio -l`, computed by fairshared (optionally under another algorithm)",
        description="Print every pending job's priority factors as the cluster's `sprio -l` does (same "
        "columns, widths and rounding: ACCOUNT and QOSNAME from Slurm 23.02 on), computed from the cluster's "
        "weights and our own fair-share factors.  --algorithm shows what they would be under another "
        "fair-share algorithm.",
    )
    add_source(p)
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the cluster's PriorityFlags say)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_at(p)
    p.add_argument("-j", "--jobs", type=job_id_list, metavar="ID[,ID]",
                   help="as sprio -j: only these jobs (123; 123_4 selects 123 as sprio does; 123+1 is 124)")
    p.add_argument("-u", "--user", type=name_list, metavar="USER[,USER]", help="as sprio -u: only these users' jobs")
    p.add_argument("-p", "--partition", type=name_list, metavar="PART[,PART]",
                   help="as sprio -p: only the rows of these partitions")
    p.add_argument("-l", "--long", action="store_true",
                   help="as sprio -l: the long format, which is what fairshared sprio always prints (with -w: the "
                   "weights under the long header)")
    p.add_argument("-w", "--weights", action="store_true",
                   help="print the configured weights exactly as `sprio -w` does (its short format; with -l its "
                   "long one) instead of jobs")
    p.set_defaults(func=cmd_sprio)


def cmd_sprio(args: argparse.Namespace) -> int:
    ev = evaluate(args)
    pi, now, result = ev.pi, ev.now, ev.result
    settings = ev.settings
    cluster = details(pi)
    save_if_asked(args, pi, now)
    if args.weights:
        tres = settings.weight_tres_text
        sys.stdout.write(render_sprio_weights_long(settings, tres, cluster.slurm_version) if args.long
                         else render_sprio_weights(settings, tres, user_column=bool(args.user)))
        return 0
    rows = [r for r in sprio(pi.jobs, fairshare_of(result), cluster, settings, now) if _wanted(r, args)]
    if args.format == "json":
        json.dump({"jobs": [r.as_json() for r in rows]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_sprio(rows, version=cluster.slurm_version))
    sys.stdout.flush()  # the note goes after the header it explains
    if not rows and (args.jobs or args.user or args.partition):
        print(f"fairshared: no pending job matches {_filters(args)}", file=sys.stderr)
    elif not rows:  # a bare header alone reads like a failure
        where = "an sshare dump has no jobs: " if getattr(args, "from_sshare", None) else ""
        print(f"fairshared: no pending jobs in this input ({where}`fairshared compute` prints the factors)",
              file=sys.stderr)
    return 0


def _wanted(row: SprioRow, args: argparse.Namespace) -> bool:
    """sprio's -j, -u and -p (src/sprio/filter.c): a row passes when it matches every list given."""
    return ((not args.jobs or row.job_id in args.jobs)
            and (not args.user or row.user in args.user)
            and (not args.partition or row.partition in args.partition))


def _filters(args: argparse.Namespace) -> str:
    """The filters as given (``-j 12,13 -u alice``), for the no-match note."""
    given = (("-j", args.jobs), ("-u", args.user), ("-p", args.partition))
    return " ".join(f"{flag} {','.join(map(str, values))}" for flag, values in given if values)
