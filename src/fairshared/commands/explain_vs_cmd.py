"""``fairshared explain JOBID --vs OTHER``: why one job ranks above another, in plain words.

The figures come from :func:`fairshared.explain_vs.explain_vs`; this module reads the inputs the
way ``explain`` does and renders them as text or JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..explain_vs import explain_vs
from .common import evaluate, save_if_asked
from ..explain_common import details, utc


def add_arguments(e: argparse.ArgumentParser) -> None:
    """The ``explain`` options this command adds: ``--vs`` and ``--format``."""
    e.add_argument("--vs", metavar="OTHER",
                   help="compare with OTHER, a job id or USER[:ACCOUNT] (that association): say why one ranks "
                   "above the other and split the priority difference into its factors")
    e.add_argument("--format", choices=("table", "json"), default="table",
                   help="text (default) or the same content as JSON (with or without --vs)")


def cmd_explain_vs(args: argparse.Namespace) -> int:
    ev = evaluate(args)
    pi, now, when, result = ev.pi, ev.now, ev.when, ev.result
    save_if_asked(args, pi, now)
    data = explain_vs(result, pi.jobs, details(pi), ev.settings, now,
                      args.job, args.vs, sibling_order=pi.sibling_order, dampening=ev.params.dampening,
                      priority_levels=ev.params.priority_levels)
    if args.format == "json":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_vs(data, when))
    return 0


# --- text -----------------------------------------------------------------------------------------------


def _who(side: dict) -> str:
    head = f"job {side['job_id']} ({side['user']}, {side['account']})" if side["job_id"] is not None \
        else f"association {side['user']} in {side['account']}"
    return head


def _f(x) -> str:
    return "inf" if x == "inf" else "-" if x is None else f"{x:.6f}"


def _ratio(x) -> str:
    return "undefined (both 0)" if x is None else "inf" if x == "inf" else f"{x:.3g}"


def render_vs(data: dict, when: str = "") -> str:
    a, b = data["a"], data["b"]
    out: list[str] = []
    w = out.append
    alg = data["algorithm"]
    w(f"{_who(a)} vs {_who(b)} — {alg}, evaluated at {utc(data['evaluated_at'])}" + (f" ({when})" if when else ""))
    hi = data["higher"]
    if hi is None:
        w("They rank equal.")
    else:
        top, low = (a, b) if hi == "a" else (b, a)
        w(f"{_who(top)} ranks above {_who(low)}.")
    w("")
    d = data["detail"]
    fs = data["fairshare"]
    rank = {k: (f", rank {s['rank']}" if "rank" in s else "") for k, s in (("a", a), ("b", b))}
    w(f"Fair-share factor: {a['user']} {a['fairshare']:.6f}{rank['a']}; {b['user']} {b['fairshare']:.6f}{rank['b']}.")
    if d is None:
        w("  (a job without an association gets factor 0)")
    elif alg == "fair_tree":
        _fair_tree_text(d, w)
    elif alg == "classic":
        for k in ("a", "b"):
            s = d[k]
            via = "" if s["values_of"] == s["name"] else f" (Fairshare=parent: {s['values_of']}'s values)"
            expo = "-" if s["exponent"] is None else f"{s['exponent']:.6f}"
            w(f"  {s['name']}{via}: F = 2^(−UE / S / d) = 2^(−{s['effective_usage']:.6f} / {s['norm_shares']:.6f} / "
              f"{s['dampening']:g}) = 2^(−{expo}) = {s['fairshare']:.6f}"
              + ("  (0 shares: F = 0)" if s["norm_shares"] <= 0 else ""))
        w("  The smaller UE / S (effective usage per share) gets the larger factor.")
    else:
        _level_based_text(d, w)
    w(f"  Weighted: PriorityWeightFairshare {fs['weight']} × ΔF {fs['difference']:+.6f} = {fs['points']:+,.2f} points.")
    pts = data["points"]
    if pts is not None:
        w("")
        w(f"Priority (as `fairshared sprio` computes it): job {a['job_id']} {pts['a_priority']} in "
          f"{pts['a_partition']}, job {b['job_id']} {pts['b_priority']} in {pts['b_partition']}: "
          f"difference {pts['total']:+,}.")
        if pts["operator_set"]:
            w(f"  An operator fixed the priority of job {' and '.join(map(str, pts['operator_set']))}: no factors count.")
        for k, listed in pts["listed_by_sprio"].items():
            if not listed:
                w(f"  (job {data[k]['job_id']} is not listed by sprio: held, not eligible yet or not pending)")
        w(f"  {'factor':<16} {'job ' + str(a['job_id']):>14} {'job ' + str(b['job_id']):>14} {'difference':>12}")
        for r in pts["factors"]:
            if r["a"] or r["b"]:
                w(f"  {r['factor']:<16} {r['a']:>14,.2f} {r['b']:>14,.2f} {r['points']:>+12,.2f}")
        if abs(pts["truncation"]) >= 0.005:
            w(f"  {'integer cut':<16} {'':>14} {'':>14} {pts['truncation']:>+12,.2f}")
        w(f"  {'total':<16} {pts['a_priority']:>14,} {pts['b_priority']:>14,} {pts['total']:>+12,}")
    return "\n".join(out) + "\n"


def _fair_tree_text(d: dict, w) -> None:
    if d["same_association"]:
        w(f"  Both are {d['common_ancestor']}: the same association, the same factor.")
        return
    ca, cb = d["a_child"], d["b_child"]
    w(f"  The first common ancestor is {d['common_ancestor']}; below it the two sides go through "
      f"{ca['name']} and {cb['name']}:")
    for c in (ca, cb):
        sh = "parent" if c["fairshare_parent_flag"] else f"{c['raw_shares']} of {c['level_shares']}"
        pu = c["parent_usage"]
        w(f"    {c['name']:<22} S = {sh} = {c['norm_shares']:.6f}   U = {math.floor(c['raw_usage']):,} of "
          f"{math.floor(pu):,} = {c['level_usage']:.6f}   LevelFS = S / U = {_f(c['level_fs'])}")
    first, second = (ca, cb) if d["first"] == "a" else (cb, ca)
    if d["tie"]:
        w(f"  Their LevelFS are equal; Slurm's sort put {first['name']} first ({d['tie_broken_by']}), so its "
          "users were ranked first and the other's first user repeats the last rank handed out.")
    else:
        who = "all of its users rank" if first["kind"] == "account" else "it ranks"
        whom = f"all of {second['name']}'s" if second["kind"] == "account" else second["name"]
        w(f"  {first['name']} has the larger LevelFS, so {who} above {whom}.  Shares {first['name']} / "
          f"{second['name']} = {_ratio(d['shares_ratio'])}, usage {first['name']} / {second['name']} = "
          f"{_ratio(d['usage_ratio'])}: {', '.join(d['reasons'])}.")


def _level_based_text(d: dict, w) -> None:
    w(f"  FSRaw {d['a_fs_raw']} vs {d['b_fs_raw']}: {d['priority_levels']} levels of {d['bits_per_level']} bits;"
      " users are sorted by FSRaw, so the first level whose buckets differ decides.")
    for lv in d["levels"]:
        mark = "  ← decides" if lv["level"] == d["first_different_level"] else ""
        w(f"    level {lv['level']}: {lv['a_association'] or '-'} {lv['a_bucket']:X} vs "
          f"{lv['b_association'] or '-'} {lv['b_bucket']:X}{mark}")
    if d["first_different_level"] is None:
        w("  Every bucket is equal: the two FSRaw tie.")


__all__ = ["add_arguments", "cmd_explain_vs", "render_vs"]
