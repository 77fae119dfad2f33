"""``fairshared whatif``: the fair-share factors, ranks and queue order after edits to the tree.

The edits and every figure come from :mod:`fairshared.whatif` (and through it the engine); this
module reads the input like ``sprio``/``explain``/``compare`` do (live cluster, snapshot, or the
built-in demo cluster) and renders the answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ..engine import ALGORITHMS
from ..engine.decide import decide
from ..explain_vs import resolve
from ..model import InputError, Snapshot
from ..priority import PRIORITY_MAX
from ..usage import UsagePolicy
from ..whatif import OTHERS, apply_edits, fairshare_changes, order_changes, parse_edit, recovery_report
from . import dampening, in_range
from .common import (
    add_at,
    add_source,
    clock_for,
    evaluation_time,
    live,
    load_inputs,
    run_engine,
    save_if_asked,
    warn,
)
from .compare import parse_weights
from ..explain_common import duration, queue_entries


class _EditAction(argparse.Action):
    """Collect every edit option into ``args.edits`` as (kind, text), in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        edits = list(getattr(namespace, "edits", None) or [])
        edits.append((option_string.lstrip("-"), values))
        namespace.edits = edits


_target = in_range(float, 0.0, 1.0, "a fair-share factor is between 0 and 1")
_rank = in_range(int, 1, None, "ranks start at 1")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "whatif",
        help="fair-share factors, ranks and queue order after edits to the tree (shares, usage, accounts)",
        description="Apply edits to the association tree and print every user association's FairShare and "
        "rank before and after, and the pending jobs whose place in the queue changes.  Edits apply in the "
        "order given.  Usage is charged up to root as Slurm does: editing a user's usage changes its "
        "accounts' by the same amount.  --recovery says how long until an association's FairShare (or "
        "rank) comes back to a target if it runs nothing more, under the cluster's PriorityDecayHalfLife "
        "and PriorityCalcPeriod.",
    )
    add_source(p)
    p.set_defaults(edits=[])
    p.add_argument("--shares", action=_EditAction, metavar="ACCT[/USER]=N",
                   help="set an association's raw shares (an integer >= 0 or 'parent'); repeatable")
    p.add_argument("--usage", action=_EditAction, metavar="ACCT[/USER]=[+|-]N",
                   help="add (+N), remove (-N) or set (N) raw usage; ancestors change by the same amount")
    p.add_argument("--add-account", action=_EditAction, metavar="NAME:PARENT[:SHARES]",
                   help="add an account (no usage; 1 share unless given)")
    p.add_argument("--add-user", action=_EditAction, metavar="USER:ACCOUNT[:SHARES]",
                   help="add a user association (no usage; 1 share unless given)")
    p.add_argument("--move", action=_EditAction, metavar="ACCT:NEWPARENT",
                   help="move an account (and its subtree, with its usage) under another account")
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="compute 'after' with this algorithm (default: what the cluster's PriorityFlags say)")
    p.add_argument("--dampening", type=dampening, metavar="D",
                   help="compute 'after' with this FairShareDampeningFactor (classic): a whole number 0..65535 "
                   "as in slurm.conf, 0 refused by classic")
    p.add_argument("--weights", type=parse_weights, default={}, metavar="SPEC",
                   help="priority weights for the queue order, e.g. fairshare=10000 (default: the cluster's)")
    p.add_argument("--recovery", metavar="USER[:ACCOUNT]",
                   help="time until this association's FairShare reaches --target (or its rank --target-rank) "
                   "if it runs nothing more, on the edited tree")
    goal = p.add_mutually_exclusive_group()
    goal.add_argument("--target", type=_target, metavar="F", help="with --recovery: a FairShare in [0, 1]")
    goal.add_argument("--target-rank", type=_rank, metavar="N", help="with --recovery: a rank (1 = best)")
    p.add_argument("--others", choices=OTHERS, default="decay",
                   help="with --recovery: decay = nobody runs anything, the whole tree decays alike (the "
                   "factors then never change); hold = the others keep their usage where it is")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_at(p)
    p.set_defaults(func=cmd_whatif)


def whatif_data(snap: Snapshot, args: argparse.Namespace, now: int) -> dict:
    settings = snap.settings
    alg_before, engine_before = decide(settings)
    alg_after, engine_after = decide(settings, algorithm=args.algorithm, dampening=args.dampening)
    edits = [parse_edit(kind, text) for kind, text in args.edits]
    after_assocs = apply_edits(snap.associations, edits, snap.sibling_order)
    before = run_engine(snap, alg_before, engine_before)
    after = run_engine(replace(snap, associations=after_assocs), alg_after, engine_after)
    weighed = settings.with_weights(args.weights) if args.weights else settings
    entries_after = queue_entries(snap, after, weighed, now)
    data = {
        "algorithm": {"before": alg_before, "after": alg_after},
        "dampening": {"before": settings.dampening,
                      "after": settings.dampening if args.dampening is None else args.dampening},
        "edits": [f"--{k} {t}" for k, t in args.edits],
        "users": fairshare_changes(before, after),
        "jobs": order_changes(queue_entries(snap, before, weighed, now), entries_after),
        # priorities at Slurm's ceiling after the edits: among them the order is submit time, job id
        "clamped": sum(e.priority >= PRIORITY_MAX for e in entries_after),
        "pending_jobs": len(queue_entries(snap, before, weighed, now)),
        "weight_fairshare": weighed.weights["fairshare"],
    }
    if args.recovery:
        if args.target is None and args.target_rank is None:
            raise InputError("--recovery needs --target F or --target-rank N")
        side = resolve(args.recovery, [], after)
        key = after.tree.key(side["index"])
        try:
            policy = UsagePolicy.from_settings(settings)
        except ValueError as exc:
            raise InputError(f"the cluster's usage settings: {exc}") from None
        data["recovery"] = recovery_report(after_assocs, key, alg_after, engine_after, policy,
                                           target=args.target, target_rank=args.target_rank, others=args.others)
    elif args.target is not None or args.target_rank is not None:
        raise InputError("--target and --target-rank go with --recovery USER[:ACCOUNT]")
    return data


def cmd_whatif(args: argparse.Namespace) -> int:
    pi = load_inputs(args)
    warn(pi)
    now, _ = evaluation_time(args.at, pi, live(args), clock_for(args))
    save_if_asked(args, pi, now)
    data = whatif_data(pi, args, now)
    if args.format == "json":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_whatif(data))
    return 0


# --- text -----------------------------------------------------------------------------------------------


def _f(x) -> str:
    return "-" if x is None else f"{x:.6f}"


def render_whatif(data: dict) -> str:
    out: list[str] = []
    w = out.append
    alg, damp = data["algorithm"], data["dampening"]
    w("Edits: " + (" ".join(data["edits"]) or "none"))
    setting = alg["after"] if alg["before"] == alg["after"] else f"{alg['before']} → {alg['after']}"
    if damp["before"] != damp["after"]:
        setting += f", FairShareDampeningFactor {damp['before']} → {damp['after']}"
    w(f"Algorithm: {setting}")
    w("")
    w(f"  {'account':<14} {'user':<12} {'FairShare before':>17} {'rank':>5} {'after':>10} {'rank':>5}")
    for r in data["users"]:
        mark = " *" if r["changed"] else ""
        w(f"  {r['account'][:14]:<14} {(r['user'] or '')[:12]:<12} {_f(r['fairshare_before']):>17} "
          f"{r['rank_before'] or '-':>5} {_f(r['fairshare_after']):>10} {r['rank_after'] or '-':>5}{mark}")
    changed = sum(r["changed"] for r in data["users"])
    w(f"  (* = changed: {changed} of {len(data['users'])} user associations)")
    w("")
    if data.get("clamped"):
        w(f"{data['clamped']} of {data['pending_jobs']} pending jobs' priorities reach Slurm's ceiling, "
          f"{PRIORITY_MAX}, after the edits: those clamp there and are ordered by submit time and job id.")
    if not data["pending_jobs"]:
        w("No pending jobs are ranked in this input, so no queue order to compare.")
    elif not data["jobs"]:
        w(f"No pending job changes place (PriorityWeightFairshare {data['weight_fairshare']}).")
    else:
        w(f"Pending jobs that change place in their partition (PriorityWeightFairshare {data['weight_fairshare']}):")
        for j in data["jobs"]:
            w(f"  job {j['job_id']} ({j['user']}, {j['account']}) in {j['partition']}: place {j['place_before']} → "
              f"{j['place_after']}, priority {j['priority_before']} → {j['priority_after']}")
    if "recovery" in data:
        w("")
        out.extend(_recovery_text(data["recovery"]))
    return "\n".join(out) + "\n"


def _recovery_text(r: dict) -> list[str]:
    a = r["association"]
    who = f"{a['user']} in {a['account']}"
    goal = f"FairShare {r['target']:.6f}" if r["target"] is not None else f"rank {r['target_rank']}"
    lines = [f"Recovery of {who} to {goal} if it runs nothing more ({r['algorithm']}; PriorityDecayHalfLife "
             f"{duration(int(r['half_life_seconds']))}, PriorityCalcPeriod {duration(int(r['calc_period_seconds']))}: "
             f"usage × {r['decay_per_period']:.9f} per period):"]
    lines.append(f"  now: FairShare {r['fairshare_now']:.6f}, rank {r['rank_now']}.")
    others = ("nobody runs anything, so every association's usage decays by the same factor"
              if r["others"] == "decay" else "the others keep their usage where it is; only its own decays")
    if r["periods"] == 0:
        lines.append(f"  Already there ({others}).")
    elif r["periods"] is not None:
        lines.append(f"  After {r['periods']:,} calc periods = {duration(int(r['seconds']))} ({others}): "
                     f"FairShare {r['fairshare_then']:.6f}, rank {r['rank_then']}.")
    elif r["others"] == "decay":
        lines.append(f"  Never by decay alone: {others}, and every algorithm reads usage only as ratios "
                     "(to root's or to the parent's), which a common factor leaves unchanged.")
        lines.append("  It takes others' new usage: see --others hold"
                     + (f", or the next PriorityUsageResetPeriod={r['reset_period']} reset, which zeroes all usage."
                        if r["reset_period"] != "NONE" else "."))
    else:
        lines.append(f"  Never: even after {r['horizon_periods']:,} periods ({duration(int(r['horizon_periods'] * r['calc_period_seconds']))}),"
                     f" with its usage all but gone, FairShare {r['fairshare_at_horizon']:.6f}, rank "
                     f"{r['rank_at_horizon']}: the target needs others to grow (or it has too few shares).")
    return lines


__all__ = ["cmd_whatif", "register", "render_whatif", "whatif_data"]
