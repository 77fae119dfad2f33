"""From job records to associations: each record's usage in each model, charged to its association
and up the direct-parent chain to root, as slurmctld's ``_apply_new_usage`` does.

Pure: :func:`compute_usage` takes the records, the tree and a :class:`~fairshared.usage.UsagePolicy`
and gives a :class:`UsageResult`; the per-job formulas are in ``usage_models.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .model import Association
from .usage import MODELS, AssocKey, BadRecord, JobRecord, UsagePolicy
from .usage_models import billable_tres, exact_job_usage, slurm_job_usage


# --- from records to associations ------------------------------------------------------------


@dataclass
class UsageResult:
    """Usage per association (in the order of the associations given) for each model."""

    at: float
    keys: list[AssocKey]
    usage: dict[str, np.ndarray]
    bad: list[BadRecord]
    records: int = 0
    charged: int = 0
    cutoff: dict[str, float | None] = field(default_factory=dict)

    def by_key(self, model: str) -> dict[AssocKey, float]:
        return dict(zip(self.keys, self.usage[model].tolist()))

    def associations(self, assocs: Sequence[Association], model: str = "slurm") -> list[Association]:
        """The associations with their usage replaced by this model's figure (accounts: subtree sums)."""
        from dataclasses import replace

        u = self.by_key(model)
        return [replace(a, usage=float(u[a.key])) for a in assocs]


def _parent_index(associations: Sequence[Association]) -> np.ndarray:
    # parent(a) = the account association a.parent_account (user: its account; account: its parent); root: −1
    # range: −1 <= parent < len(associations); unknown parents and cycles raise ValueError
    index = {a.key: i for i, a in enumerate(associations)}
    parent = np.full(len(associations), -1, dtype=np.int64)
    for i, a in enumerate(associations):
        p = a.parent_account
        if p is None:
            continue
        j = index.get((p, None, None))
        if j is None:
            raise ValueError(f"{a.label()}: parent account {p!r} is not in the tree")
        parent[i] = j
    return parent


def charge_tree(associations: Sequence[Association], own: np.ndarray) -> np.ndarray:
    # U(a) = own(a) + Σ_{c: parent(c) = a} U(c): a charge goes to its association and every parent up to root
    # range: U(a) >= own(a) >= 0; U(root) = Σ own
    parent = _parent_index(associations)
    n = len(associations)
    depth = np.zeros(n, dtype=np.int64)
    for i in range(n):
        j, d = parent[i], 0
        while j >= 0:
            d += 1
            if d > n:
                raise ValueError(f"{associations[i].label()}: the parent chain has a cycle")
            j = parent[j]
        depth[i] = d
    total = np.array(own, dtype=float)
    for i in np.argsort(-depth, kind="stable"):
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    return total


def _needed_tres(policy: UsagePolicy) -> list[str]:
    names = {"cpu"}
    for w in policy.tres_weights.values():
        names.update(k for k, v in w.items() if v != 0 and k != "billing")
    return sorted(names)


def _resolver(associations: Sequence[Association]):
    index = {a.key: i for i, a in enumerate(associations) if a.user is not None}
    per_partition = any(a.partition for a in associations if a.user is not None)

    def resolve(assoc, partition) -> int:
        account, user, apart = assoc
        if apart is None and per_partition and partition is not None:
            i = index.get((account, user, partition))
            if i is not None:
                return i
        i = index.get((account, user, apart))
        if i is None and apart is not None:
            i = index.get((account, user, None))
        return -1 if i is None else i

    return index, per_partition, resolve


def compute_usage(records: Sequence[JobRecord], associations: Sequence[Association], policy: UsagePolicy,
                  at: float, models: Iterable[str] = MODELS) -> UsageResult:
    """Raw usage per association at time ``at`` for each model.

    Records with an end before their start, an association not in the tree,
    negative/non-finite billed TRES, or times so absurd that their usage is not a
    finite number are skipped and reported
    (``UsageResult.bad``, and a warning each); they never stop the computation.
    """
    models = list(models)
    for m in models:
        if m not in MODELS:
            raise ValueError(f"unknown usage model {m!r} (choose from {', '.join(MODELS)})")
    n = len(records)
    index, per_partition, resolve = _resolver(associations)
    # columns (one pass each; the association lookup is one dict probe per record in the common case)
    if per_partition:
        aidx = np.fromiter((resolve(r.assoc, r.partition) for r in records), dtype=np.int64, count=n)
    else:
        get = index.get
        aidx = np.fromiter((get(r.assoc, -1) for r in records), dtype=np.int64, count=n)
        miss = np.flatnonzero(aidx < 0)
        for i in miss:  # per-partition keys from the source fall back to the user's plain association
            aidx[i] = resolve(records[int(i)].assoc, records[int(i)].partition)
    start = np.fromiter((r.start for r in records), dtype=float, count=n)
    end = np.fromiter((np.nan if r.end is None else r.end for r in records), dtype=float, count=n)
    qf = np.fromiter((r.qos_usage_factor for r in records), dtype=float, count=n)
    qf = np.where(np.isfinite(qf) & (qf >= 0), qf, 1.0)  # Slurm applies UsageFactor only when >= 0
    tres = {name: np.fromiter((r.tres.get(name, 0.0) for r in records), dtype=float, count=n)
            for name in _needed_tres(policy)}
    # billable TRES, per partition's weights
    bill = billable_tres(tres, None)
    if policy.tres_weights:
        parts = [r.partition for r in records]
        for part, w in policy.tres_weights.items():
            sel = np.fromiter((p == part for p in parts), dtype=bool, count=n)
            if sel.any():
                sub = {k: v[sel] for k, v in tres.items()}
                bill[sel] = billable_tres(sub, w, policy.max_tres, policy.max_tres_gres)
    # bad records
    bad_mask = np.zeros(n, dtype=bool)
    reasons: dict[int, str] = {}

    def flag(mask, reason):
        for i in np.flatnonzero(mask & ~bad_mask):
            reasons[int(i)] = reason if isinstance(reason, str) else reason(int(i))
        bad_mask[:] |= mask

    flag(~np.isfinite(start), "start time is not a number")
    with np.errstate(invalid="ignore"):
        flag(end < start, lambda i: f"ends ({records[i].end:.0f}) before it starts ({records[i].start:.0f})")
    for name, col in tres.items():
        flag(~np.isfinite(col) | (col < 0),
             lambda i, name=name: f"TRES {name}={records[i].tres.get(name)!r} is negative or not a number")
    flag(aidx < 0,
         lambda i: "unknown association " + "/".join(str(x) for x in records[i].assoc if x is not None))
    ok = ~bad_mask
    weight = np.where(ok, bill * qf, 0.0)
    per_jobs: dict[str, np.ndarray] = {}
    cutoffs: dict[str, float | None] = {}
    with np.errstate(all="ignore"):  # absurd times overflow; such records are caught just below
        for model in models:
            cutoff = policy.reset_cutoff(at, model)
            cutoffs[model] = cutoff
            if model == "slurm":
                per_jobs[model] = slurm_job_usage(start, end, weight, at, policy, cutoff)
            else:
                per_jobs[model] = exact_job_usage(start, end, weight, at, policy.half_life, cutoff)
    for model in models:  # e.g. a start 10^38 s ago: one such record must not make its whole branch NaN
        flag(~np.isfinite(per_jobs[model]),
             lambda i: f"its usage is not a finite number (start {records[i].start!r}, end {records[i].end!r})")
    bad = [BadRecord(records[i].job_id, reasons[i]) for i in sorted(reasons)]
    ok = ~bad_mask
    leaf = np.where(ok, aidx, 0)
    usage: dict[str, np.ndarray] = {}
    for model in models:
        own = np.bincount(leaf, weights=np.where(ok, per_jobs[model], 0.0), minlength=len(associations))
        usage[model] = charge_tree(associations, own)
    return UsageResult(at=at, keys=[a.key for a in associations], usage=usage, bad=bad, records=n,
                       charged=int(ok.sum()), cutoff=cutoffs)
