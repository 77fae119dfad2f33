"""The per-association and per-job samples of a cycle as plain tuples: which rows are exported,
their labels, and each gauge's value.  Pure (numpy over the engine's arrays);
:mod:`fairshared.sinks.metrics` turns them into Prometheus families."""

from __future__ import annotations

import math
import numpy as np

ASSOC_LABELS = ("account", "user", "partition")
TREE_LABELS = (*ASSOC_LABELS, "parent", "depth")
JOB_LABELS = ("job_id", "user", "account", "partition")

# name -> HELP of the per-association gauges, in output order
ASSOC_HELP = {
    "norm_shares": "Normalised shares of the association (sshare NormShares, 0..1).",
    "usage_raw": "Raw usage charged to the association: decayed billable TRES-seconds "
                 "(CPU-seconds when TRESBillingWeights is unset; sshare RawUsage, not truncated).",
    "norm_usage": "Usage normalised to root's usage (sshare NormUsage, 0..1); absent for root.",
    "effective_usage": "Effective usage of the association (sshare EffectvUsage, 0..1); under Fair Tree "
                       "and LEVEL_BASED its usage relative to its fair-share parent's.",
    "level_fs": "LevelFS of the association (sshare LevelFS): shares over usage among its siblings, "
                "+Inf when unused; absent where sshare prints it blank.",
    "fairshare": "Fair-share factor of a user association (sshare FairShare, 0..1, higher is better); "
                 "accounts have no factor and no series.",
    "rank": "Rank of the user association by fair-share factor, 1 = best (competition ranking: ties share "
            "the best rank); accounts have no series.",
}


ASSOCIATIONS = ("all", "accounts", "none")  # metrics.associations


class _NoTree:
    n = 0
    is_user = np.zeros(0, dtype=bool)


NO_TREE = _NoTree()


def exported_rows(tree, which: str = "all"):
    """Which associations get per-association series: all, the accounts only (no user rows: a tree
    of 100,000 associations is ~95 % users), or none."""
    if which == "all":
        return range(tree.n)
    if which == "accounts":
        return np.flatnonzero(~np.asarray(tree.is_user, dtype=bool)).tolist()
    if which == "none":
        return []
    raise ValueError(f"metrics.associations: {which!r} is not one of {', '.join(ASSOCIATIONS)}")


def tree_labels(tree, which: str = "all") -> tuple[tuple[str, ...], ...]:
    """(account, user, partition, parent, depth) of every association, in tree order.

    The first three are labelled as in the per-association series (so the two join); parent is the
    direct parent account's name (an account's own for a user association), "" for root; depth
    counts from root = 0.
    """
    depth = tree.depth
    labels = assoc_labels(tree)
    return tuple((*labels[i], tree.parent_name(i) or "", str(int(depth[i]))) for i in exported_rows(tree, which))


def assoc_labels(tree) -> list[tuple[str, str, str]]:
    """(account, user, partition) of every association as the series label them ("" for None)."""
    return [(tree.account[i], tree.user[i] or "", tree.partition[i] or "") for i in range(tree.n)]


def association_samples(result, which: str = "all"
                        ) -> tuple[tuple[str, tuple[tuple[tuple[str, ...], float], ...]], ...]:
    """Per-association samples of a Result: NaN rows omitted, fairshare and rank for users only;
    ``which``: the rows exported (:func:`exported_rows`)."""
    t = result.tree
    labels = assoc_labels(t)
    rows = exported_rows(t, which)
    is_user = np.asarray(t.is_user, dtype=bool)
    rated = [i for i in rows if is_user[i] and not math.isnan(float(result.fairshare[i]))]
    ranks = result.user_ranks()
    columns = {
        "norm_shares": result.norm_shares,
        "usage_raw": t.usage,
        "norm_usage": result.norm_usage,
        "effective_usage": result.effective_usage,
        "level_fs": result.level_fs,
    }
    out = []
    for name, col in columns.items():
        out.append((name, tuple((labels[i], v) for i in rows if not math.isnan(v := float(col[i])))))
    out.append(("fairshare", tuple((labels[i], float(result.fairshare[i])) for i in rated)))
    out.append(("rank", tuple((labels[i], float(ranks[i])) for i in rated)))
    return tuple(out)


PRIORITY_FACTORS = ("age", "assoc", "fairshare", "jobsize", "partition", "qos", "tres", "site", "nice")


def priority_samples(priorities, job_ids: set[int]):
    """Per job and partition: (job_id, labels, total, ((factor, points), ...)) of the jobs in
    ``job_ids`` (the pending jobs within the metrics.per_job cap), by job id and partition.

    Points are the weighted factors as slurmctld sums them (sprio -l prints them rounded); ``tres``
    is the sum over the weighted TRES, ``site`` the SiteFactor, ``nice`` the nice (subtracted).
    """
    out = []
    for f in priorities:
        j = f.job
        if j.job_id not in job_ids:
            continue
        points = {**f.weighted, "tres": float(sum(f.tres_weighted.values())), "site": float(f.site),
                  "nice": float(f.nice)}
        out.append((j.job_id, (str(j.job_id), j.user, j.account, f.partition), float(f.priority),
                    tuple((k, float(points[k])) for k in PRIORITY_FACTORS)))
    return tuple(sorted(out, key=lambda p: (p[0], p[1][3])))
