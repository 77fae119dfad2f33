"""``fairshared usage``: raw usage computed from the accounting records, beside slurmctld's own.

Also :func:`accounting_usage`, which ``fairshared compute --usage accounting``
(and the daemon) use to replace slurmctld's usage with the one computed from
slurmdbd's job records.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime
from typing import Sequence, TextIO

from ..model import Association, Snapshot
from ..settings import ClusterSettings
from ..sources.accounting import usage_from_records
from ..sources.sacct import load_accounting
from ..sources.slurm_cli import SlurmCli
from ..usage import MODELS, BadRecord, JobRecord, UsagePolicy
from ..usage_charge import UsageResult, compute_usage
from . import positive_float as _positive_float

FORMATS = ("table", "json")


def _models(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose one or more of {','.join(MODELS)}")
    return list(dict.fromkeys(names))


def parse_at(text: str) -> float:
    """``now``, epoch seconds, or an ISO 8601 time (local time when it has no offset)."""
    t = text.strip()
    if t.lower() == "now":
        return time.time()
    try:
        return float(t)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither epoch seconds nor an ISO 8601 time") from None
    return dt.timestamp()  # naive = local time




def register(subparsers) -> None:
    """Add ``fairshared usage`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "usage",
        help="raw usage per association computed from the accounting records, beside slurmctld's",
        description="Compute every association's raw usage (decayed billable TRES-seconds) from slurmdbd's "
        "job records (sacct) with the cluster's PriorityDecayHalfLife, PriorityCalcPeriod, "
        "PriorityUsageResetPeriod, TRESBillingWeights, MAX_TRES and AccountingStorageEnforce, under the "
        "'slurm' model (slurmctld's own per-iteration arithmetic) and the 'exact' model (continuous "
        "exponential decay), and print it beside slurmctld's figure.",
    )
    p.add_argument("--source", choices=["slurm"], default="slurm",
                   help="read the cluster through Slurm's command-line tools "
                   "(sacct, sacctmgr, scontrol, sshare)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--at", type=parse_at, metavar="TIME",
                   help="usage at TIME: epoch seconds or ISO 8601 (local time without an offset); "
                   "default: now.  slurmctld's column is then left empty (it only knows now)")
    p.add_argument("--models", type=_models, default=list(MODELS), metavar="slurm,exact",
                   help="which models to compute (default: slurm,exact)")
    p.add_argument("--timeout", type=_positive_float, default=60.0, metavar="SECONDS",
                   help="how long each Slurm command may take (default: 60)")
    p.set_defaults(func=cmd_usage)


# --- reading and computing --------------------------------------------------------------------


def accounting_usage(snapshot_associations: Sequence[Association], settings: ClusterSettings,
                     records: Sequence[JobRecord], *, state: dict | None = None, at: float | None = None,
                     model: str = "slurm") -> list[Association]:
    """The associations with slurmctld's usage replaced by the one computed from ``records``.

    ``settings`` are the snapshot's, ``state`` optionally what
    :func:`fairshared.sources.sacct.usage_settings` reads (billing weights,
    decay-iteration phase, last reset).  Account associations get the sum of
    their subtree (usage is charged up the direct-parent chain to root).
    Bad records are skipped and logged, never fatal.
    """
    at = time.time() if at is None else at
    policy = UsagePolicy.from_settings(settings, state)
    result = compute_usage(records, snapshot_associations, policy, at, [model])
    if result.bad:
        from ..usage import report_bad

        report_bad(result.bad, "usage")
    return result.associations(snapshot_associations, model)


def replace_with_accounting(snap: Snapshot, timeout: float, model: str = "slurm") -> Snapshot:
    """``compute --usage accounting``: the live snapshot with usage from sacct (``model``)."""
    snap, bad = usage_from_records(snap, SlurmCli(timeout=timeout), model, time.time())
    _warn_bad(bad, sys.stderr)
    return snap


# --- output ---------------------------------------------------------------------------------


def usage_rows(associations: Sequence[Association], result: UsageResult,
               slurmctld: dict | None) -> list[dict]:
    """One dict per association, tree order: account, user, partition, slurmctld, slurm, exact."""
    rows = []
    for i, a in enumerate(associations):
        row = {"account": a.account, "user": a.user, "partition": a.partition,
               "slurmctld": None if slurmctld is None else slurmctld.get(a.key)}
        for m in MODELS:
            row[m] = float(result.usage[m][i]) if m in result.usage else None
        rows.append(row)
    return rows


def _depths(associations: Sequence[Association]) -> list[int]:
    parent = {a.key: (a.parent_account, None, None) for a in associations if a.parent_account is not None}
    out = []
    for a in associations:
        d, k, seen = 0, a.key, 0
        while k in parent and seen <= len(associations):
            k = parent[k]
            d += 1
            seen += 1
        out.append(d)
    return out


def _num(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def write_table(associations: Sequence[Association], rows: list[dict], models: list[str],
                out: TextIO) -> None:
    depth = _depths(associations)
    cols = ["Account", "User", "Partition", "slurmctld", *models]
    table = []
    for d, r in zip(depth, rows):
        table.append([" " * d + r["account"], r["user"] or "", r["partition"] or "",
                      _num(r["slurmctld"]), *[_num(r[m]) for m in models]])
    widths = [max([len(c)] + [len(t[i]) for t in table]) for i, c in enumerate(cols)]
    fmt = [("<" if i < 3 else ">") for i in range(len(cols))]
    out.write(" ".join(f"{c:{f}{w}}" for c, f, w in zip(cols, fmt, widths)).rstrip() + "\n")
    out.write(" ".join("-" * w for w in widths) + "\n")
    for t in table:
        out.write(" ".join(f"{c:{f}{w}}" for c, f, w in zip(t, fmt, widths)).rstrip() + "\n")


def write_json(rows: list[dict], out: TextIO) -> None:
    json.dump({"associations": rows}, out, indent=1)
    out.write("\n")


def _warn_bad(bad: list[BadRecord], err: TextIO) -> None:
    if bad:
        err.write(f"fairshared: {len(bad)} accounting record(s) skipped as bad; first: {bad[0]}\n")


def cmd_usage(args: argparse.Namespace) -> int:
    cli = SlurmCli(timeout=args.timeout)
    snap = cli.snapshot(jobs=False)
    at = args.at if args.at is not None else time.time()
    state, policy, records, bad = load_accounting(cli, snap.settings, at)
    result = compute_usage(records, snap.associations, policy, at, args.models)
    ctld = None if args.at is not None else {a.key: a.usage for a in snap.associations}
    rows = usage_rows(snap.associations, result, ctld)
    if "priority_last_decay_ran" not in state and "slurm" in args.models:
        sys.stderr.write("fairshared: note: slurmctld's decay-iteration times are unknown (its state file "
                         "priority_last_decay_ran is not readable); the slurm model assumes iterations at "
                         "multiples of PriorityCalcPeriod\n")
    _warn_bad(bad + result.bad, sys.stderr)
    if args.format == "json":
        write_json(rows, sys.stdout)
    else:
        write_table(snap.associations, rows, args.models, sys.stdout)
    return 0
