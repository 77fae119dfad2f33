"""Why one job (or association) ranks above another: the pure core of ``fairshared explain JOB --vs OTHER``.

Every number comes from the functions that compute what fairshared pushes: the fair-share
figures from :mod:`fairshared.engine` (the same ``norm_shares``/``level_usage``/``level_fs``
the algorithms call), the job priorities from :func:`fairshared.priority.sprio_rows`, i.e. the
PRIORITY column ``fairshared sprio`` prints.  Nothing here re-derives a formula; it picks the
figures that decide the order and says which one decided it:

* Fair Tree — the first common ancestor C of the two associations in the fair-share tree (fs
  parents: Fairshare=parent accounts are flattened, as Slurm's ``children_list`` is), and the
  two children of C on the way to each side.  Fair Tree visits C's children by LevelFS = S / U
  (S = shares / level_shares, U = usage / usage of C), high first, and hands out ranks depth
  first, so whichever child has the larger LevelFS puts *all* of its users ahead.  On an exact
  tie (long double ``==``) users go before accounts, then Slurm's sibling order decides.
* classic — each side's F = 2^(−UE / S / d) with its effective usage UE, normalised shares S
  and FairShareDampeningFactor d.
* LEVEL_BASED — each side's 64-bit FSRaw cut into its per-level buckets; the first level where
  the buckets differ decides.

:func:`explain_vs` returns a JSON-ready ``dict``; rendering lives in
:mod:`fairshared.commands.explain_vs_cmd`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .engine import fair_tree, level_based

# job_assoc/assoc_index: where they live today (a command module); they belong beside Result
from .engine.ranks import AssocIndex, assoc_index, job_assoc
from .engine.result import Result
from .explain_common import find_job
from .model import ClusterInfo, InputError, Job
from .priority_sprio import SprioRow, listed_by_sprio, sprio_rows
from .settings import ClusterSettings

# The order of tied siblings in Fair Tree's stable sort, per sibling-order kind (engine/sibling_order.py)
TIE_ORDER = {
    "lft": "slurmdbd's nested-set order, ascending lft (the newest sibling first): Slurm 22.05 after "
           "slurmctld loaded the whole tree",
    "name": "users first, then by name: Slurm 22.05 after an association was added, removed or moved "
            "at run time",
    "lineage": "the lineage string order of Slurm 23.11 and later",
    "input": "the order the input listed them in (the source gave no sibling order)",
}

# sprio's columns (SprioRow fields) and what they are called in the text
POINT_COLUMNS = (("fairshare", "fair-share"), ("age", "age"), ("jobsize", "job size"),
                 ("partition_factor", "partition"), ("qos", "QOS"), ("assoc", "association"))


# --- the two sides ----------------------------------------------------------------------------------


def resolve(ref: str, jobs: Sequence[Job], result: Result, *, job_only: bool = False,
            index: AssocIndex | None = None) -> dict:
    """A side of the comparison: a job (by id or display id), else USER[:ACCOUNT], an association.

    Raises :class:`InputError` naming ``ref`` when it is neither, or when USER alone is in several
    accounts.
    """
    job = find_job(jobs, ref)
    tree = result.tree
    if job is not None:
        i = job_assoc(job, assoc_index(result) if index is None else index)
        return {"ref": ref, "job": job, "job_id": job.job_id, "user": job.user, "account": job.account,
                "partition": tree.partition[i] if i is not None else None, "index": i}
    if job_only:
        raise InputError(f"job {ref} is not among the jobs read")
    user, _, account = ref.partition(":")
    cands = [i for i in range(tree.n) if tree.user[i] == user and (not account or tree.account[i] == account)]
    if not cands:
        what = f"user {user!r}" + (f" in account {account!r}" if account else "")
        raise InputError(f"{ref!r} is neither a job read nor an association ({what} not found)")
    plain = [i for i in cands if tree.partition[i] is None] or cands
    if len({tree.account[i] for i in plain}) > 1:
        accts = ", ".join(sorted({tree.account[i] for i in plain}))
        raise InputError(f"user {user!r} is in several accounts ({accts}): say USER:ACCOUNT", ref)
    i = plain[0]
    return {"ref": ref, "job": None, "job_id": None, "user": user, "account": tree.account[i],
            "partition": tree.partition[i], "index": i}


def _fs(result: Result, i: int | None) -> float:
    # the factor sprio uses: 0 without an association ("Unable to compute fairshare") or where blank
    if i is None:
        return 0.0
    v = float(result.fairshare[i])
    return 0.0 if math.isnan(v) else v


def _name(tree, i: int) -> str:
    if i == 0:
        return tree.account[0]
    if tree.user[i] is not None:
        return f"{tree.user[i]} ({tree.account[i]}" + (f", {tree.partition[i]})" if tree.partition[i] else ")")
    return tree.account[i]


def _num(x) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


# --- per algorithm ------------------------------------------------------------------------------------


def fair_tree_part(result: Result, a: int, b: int, sibling_order: str) -> dict:
    """The first common fs ancestor of ``a`` and ``b`` and its two children that lead to them.

    LevelFS = S / U in [0, inf] from ``fair_tree.level_fs`` (inf: no usage; 0: no shares).  The
    child with the larger LevelFS puts all its users first; ``shares_ratio`` = S_higher / S_lower
    and ``usage_ratio`` = U_higher / U_lower say whether more shares, less usage or both made the
    difference (LevelFS ratio = shares_ratio / usage_ratio).
    """
    tree = result.tree
    s = fair_tree.norm_shares(tree)
    u = fair_tree.level_usage(tree)
    lfs = fair_tree.level_fs(tree, s, u)
    fsp = tree.fs_parent

    def chain(i: int) -> list[int]:
        out = [i]
        while out[-1] > 0:
            out.append(int(fsp[out[-1]]))
        return out

    ca_chain, cb_chain = chain(a), chain(b)
    if a == b:
        return {"same_association": True, "common_ancestor": _name(tree, a)}
    on_b = set(cb_chain)
    common = next(x for x in ca_chain if x in on_b)
    ca = ca_chain[ca_chain.index(common) - 1]
    cb = cb_chain[cb_chain.index(common) - 1]

    def child(i: int) -> dict:
        lv = lfs[i]
        return {"name": _name(tree, i), "kind": "user" if tree.is_user[i] else "account",
                "fairshare_parent_flag": bool(tree.use_parent[i]),
                "raw_shares": "parent" if tree.use_parent[i] else int(tree.shares[i]),
                "level_shares": int(tree.level_shares[i]), "norm_shares": float(s[i]),
                "raw_usage": float(tree.usage[i]), "parent_usage": float(tree.usage[common]),
                "level_usage": float(u[i]),
                "level_fs": "inf" if np.isinf(lv) else float(lv),
                "position": int(i)}

    la, lb = lfs[ca], lfs[cb]
    part = {"same_association": False, "common_ancestor": _name(tree, common),
            "a_child": child(ca), "b_child": child(cb)}
    if la == lb:  # the exact long-double comparison _calc_tree_fs makes
        if tree.is_user[ca] != tree.is_user[cb]:
            first, why = ("a" if tree.is_user[ca] else "b"), "users before accounts on equal LevelFS"
        else:
            first = "a" if ca < cb else "b"  # the stable sort keeps children_list order (tree index order)
            why = "sibling order: " + TIE_ORDER.get(sibling_order, TIE_ORDER["input"])
        part.update(tie=True, first=first, tie_broken_by=why)
        return part
    hi, lo, first = (ca, cb, "a") if la > lb else (cb, ca, "b")
    with np.errstate(divide="ignore", invalid="ignore"):
        sr = float(s[hi]) / float(s[lo]) if s[lo] else math.inf
        ur = float(u[hi]) / float(u[lo]) if u[lo] else (math.nan if u[hi] == 0 else math.inf)
    reasons = []
    if tree.use_parent[hi] and tree.is_user[hi]:
        reasons.append("a Fairshare=parent user has LevelFS inf: it goes first among its siblings")
    elif u[hi] == 0 and s[hi] > 0:
        reasons.append("no usage at all: LevelFS inf")
    elif s[lo] == 0 and not tree.use_parent[lo]:
        reasons.append("the other side has 0 shares: LevelFS 0, always last")
    else:
        if sr > 1:
            reasons.append("more shares")
        if ur < 1:
            reasons.append("less usage")
        if sr < 1:
            reasons.append("despite fewer shares")
        if ur > 1:
            reasons.append("despite more usage")
    part.update(tie=False, first=first, shares_ratio=_ratio(sr), usage_ratio=_ratio(ur), reasons=reasons)
    return part


def _ratio(x: float):
    return None if math.isnan(x) else ("inf" if math.isinf(x) else x)


def classic_part(result: Result, a: int, b: int, dampening: float) -> dict:
    """Each side's F = 2^(−UE / S / d), UE and S as ``classic.compute`` left them in the result.

    A Fairshare=parent user takes its fs parent's UE and S (``classic.fairshare_factor``).
    """
    tree = result.tree

    def side(i: int) -> dict:
        g = int(tree.fs_parent[i]) if (tree.use_parent[i] and tree.is_user[i]) else i
        ue = float(result.effective_usage[g])
        sh = float(result.norm_shares[g])
        return {"name": _name(tree, i), "values_of": _name(tree, g), "norm_usage": _num(result.norm_usage[i]),
                "effective_usage": ue, "norm_shares": sh, "dampening": dampening,
                "exponent": (ue / sh / dampening) if sh > 0 else None, "fairshare": float(result.fairshare[i])}

    return {"a": side(a), "b": side(b)}


def level_based_part(result: Result, a: int, b: int, priority_levels: int | None) -> dict:
    """Each side's FSRaw cut into buckets: level k holds bits [(L−k−1)·w + 64 mod L, …) of w = 64 // L bits.

    ``L`` is PriorityLevels (None: what ``level_based.compute`` chose, enough for the tree).
    """
    tree = result.tree
    L = priority_levels or level_based.default_priority_levels(tree)
    width, unused = 64 // L, 64 % L
    mask = (1 << width) - 1
    lvl = level_based.levels_of(tree)

    def at_level(i: int, k: int) -> str | None:  # the association whose bucket fills level k on i's path
        x = i
        while x > 0:
            if lvl[x] == k and not tree.use_parent[x]:
                return _name(tree, x)
            x = int(tree.parent[x])
        return None

    if result.fs_raw is None:  # every level_based Result has it
        raise ValueError("level_based_part needs a level_based result (FSRaw)")
    raw_a, raw_b = int(result.fs_raw[a]), int(result.fs_raw[b])
    levels = []
    first_diff = None
    for k in range(L):
        shift = (L - k - 1) * width + unused
        ba, bb = (raw_a >> shift) & mask, (raw_b >> shift) & mask
        levels.append({"level": k, "a_association": at_level(a, k), "b_association": at_level(b, k),
                       "a_bucket": ba, "b_bucket": bb})
        if first_diff is None and ba != bb:
            first_diff = k
    return {"priority_levels": L, "bits_per_level": width, "a_fs_raw": f"{raw_a:016X}",
            "b_fs_raw": f"{raw_b:016X}", "levels": levels, "first_different_level": first_diff}


# --- points ---------------------------------------------------------------------------------------------


def point_differences(ra: SprioRow, rb: SprioRow) -> dict:
    """sprio's weighted columns of a minus b; their sum plus sprio's truncation = PRIORITY_a − PRIORITY_b.

    ``truncation`` is what the integer cut (and the max(·, 1) floor) of each PRIORITY adds, in
    (−1, 1) for two jobs whose totals are above 1.
    """
    rows = [{"factor": name, "a": getattr(ra, f), "b": getattr(rb, f), "points": getattr(ra, f) - getattr(rb, f)}
            for f, name in POINT_COLUMNS]
    ta, tb = dict(ra.tres), dict(rb.tres)
    for t in sorted(set(ta) | set(tb)):
        rows.append({"factor": f"TRES {t}", "a": ta.get(t, 0.0), "b": tb.get(t, 0.0),
                     "points": ta.get(t, 0.0) - tb.get(t, 0.0)})
    rows.append({"factor": "site factor", "a": float(ra.site), "b": float(rb.site), "points": float(ra.site - rb.site)})
    rows.append({"factor": "nice", "a": float(-ra.nice), "b": float(-rb.nice), "points": float(rb.nice - ra.nice)})
    summed = sum(r["points"] for r in rows)
    total = ra.priority - rb.priority
    return {"factors": rows, "sum": summed, "truncation": total - summed, "total": total}


# --- the comparison ------------------------------------------------------------------------------------


def explain_vs(result: Result, jobs: Sequence[Job], cluster: ClusterInfo, settings: ClusterSettings, now: int,
               ref_a: str, ref_b: str, *, sibling_order: str = "input", dampening: float = 1.0,
               priority_levels: int | None = None, index: AssocIndex | None = None) -> dict:
    """Why ``ref_a`` ranks above or below ``ref_b`` under ``result``'s algorithm, as a JSON-ready dict.

    ``higher`` is the side ``fairshared sprio`` puts first (larger PRIORITY) when both are jobs,
    else the side with the larger fair-share factor (None on a tie).  ``points`` (jobs only)
    splits PRIORITY_a − PRIORITY_b into sprio's weighted columns, fair-share =
    PriorityWeightFairshare × ΔF among them.  ``index``: the associations by key (``assoc_index``),
    when the caller keeps one.
    """
    A = resolve(ref_a, jobs, result, job_only=True, index=index)
    B = resolve(ref_b, jobs, result, index=index)
    fa, fb = _fs(result, A["index"]), _fs(result, B["index"])
    out: dict = {"algorithm": result.algorithm, "evaluated_at": now}
    for key, side, f in (("a", A, fa), ("b", B, fb)):
        out[key] = {k: side[k] for k in ("ref", "job_id", "user", "account", "partition")}
        out[key]["fairshare"] = f
        if side["index"] is not None:
            out[key]["rank"] = int(result.user_ranks()[side["index"]])
    out["fairshare"] = {"weight": settings.weights["fairshare"], "difference": fa - fb,
                        "points": settings.weights["fairshare"] * (fa - fb)}
    ia, ib = A["index"], B["index"]
    if ia is None or ib is None:
        out["detail"] = None  # a job without an association: fair-share factor 0, nothing to trace
    elif result.algorithm == "fair_tree":
        out["detail"] = fair_tree_part(result, ia, ib, sibling_order)
    elif result.algorithm == "classic":
        out["detail"] = classic_part(result, ia, ib, dampening)
    else:
        out["detail"] = level_based_part(result, ia, ib, priority_levels)
    out["points"] = None
    if A["job"] is not None and B["job"] is not None:
        ra = sprio_rows(A["job"], fa, cluster, settings, now)[0]  # the job's own row (first partition × QOS)
        rb = sprio_rows(B["job"], fb, cluster, settings, now)[0]
        pts = point_differences(ra, rb)
        pts["a_priority"], pts["b_priority"] = ra.priority, rb.priority
        pts["a_partition"], pts["b_partition"] = ra.partition, rb.partition
        pts["listed_by_sprio"] = {"a": listed_by_sprio(A["job"], settings, now),
                                  "b": listed_by_sprio(B["job"], settings, now)}
        pts["operator_set"] = [j.job_id for j in (A["job"], B["job"]) if j.direct_set_prio and j.priority > 0]
        out["points"] = pts
        diff = pts["total"]
    else:
        diff = fa - fb
    out["higher"] = "a" if diff > 0 else "b" if diff < 0 else None
    return out


__all__ = ["POINT_COLUMNS", "TIE_ORDER", "explain_vs", "point_differences", "resolve"]
