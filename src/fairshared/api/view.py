"""The API's view of the last cycle: what ``/api/v1/`` answers from, built once per cycle.  Pure.

:func:`build_view` turns a finished :class:`~fairshared.cycle.CycleResult` (its snapshot and the
engine's :class:`~fairshared.engine.result.Result`) into an immutable :class:`View` that outlives
the cycle, so it keeps what is small: the engine's arrays and the tree's name lists (the Result
itself), the rank, depth, children count and subtree end of every association, name → rows
indexes for users and accounts, and the pending jobs as columns (:mod:`fairshared.api.columns`).
Explanations are computed when asked (:mod:`fairshared.api.answers`), from the functions the
commands use; the scheduler's order of the whole queue, which they need, is sorted once per view.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..cycle import CycleResult
from ..engine import Params
from ..engine.ranks import assoc_index, job_assoc
from ..engine.result import Result
from ..model import ClusterInfo
from ..settings import ClusterSettings
from .columns import JobTable, NameIndex

__all__ = ["View", "build_view", "num"]


def num(x) -> float | str | None:
    """A JSON number: NaN (a blank sshare column) is null, infinity the string "inf" (as explain's JSON)."""
    v = float(x)
    return None if math.isnan(v) else "inf" if math.isinf(v) else v


@dataclass(frozen=True, eq=False)
class View:
    """One cycle's figures, indexed for the API (see the module docstring).

    Row ``i`` is association ``i`` of the cycle's tree (a preorder: a subtree is the rows ``i`` to
    ``end[i] - 1``).  ``rank`` is 0 for accounts; ``job_assoc`` is -1 for a job without an
    association (its fair-share factor is then 0, as Slurm's)."""

    number: int
    evaluated_at: int  # Unix seconds: the time the cycle's job priorities are evaluated at
    evaluated_at_is: str  # which time that is, in words (explain's ``evaluated_at_is``)
    result: Result
    rank: np.ndarray  # int64
    depth: np.ndarray  # int32
    children: np.ndarray  # int32
    end: np.ndarray  # int64
    users: NameIndex
    accounts: NameIndex
    user_count: int  # Fair Tree's N: the "of" of a rank
    jobs: JobTable
    job_assoc: np.ndarray  # int32
    jobs_by_user: NameIndex
    settings: ClusterSettings
    cluster: ClusterInfo  # the partitions and QOS of a read with details; ClusterInfo() without
    has_details: bool
    sibling_order: str
    engine_params: Params
    cache: dict = field(default_factory=dict, repr=False)  # what answers compute once (answers.py)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the cache's
    sort_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the queue's one sort

    @property
    def n(self) -> int:
        return self.result.tree.n

    @property
    def algorithm(self) -> str:
        return self.result.algorithm

    @property
    def private(self) -> tuple[str, ...]:
        return self.settings.private_data

    def key(self, i: int) -> tuple[str, str | None, str | None]:
        return self.result.tree.key(i)

    def row(self, i: int) -> dict:
        """Association ``i`` as the API's Row: every sshare column, the rank, depth and children."""
        t, r = self.result.tree, self.result
        return {"id": i, "parent": int(t.parent[i]) if i else None, "depth": int(self.depth[i]),
                "account": t.account[i], "user": t.user[i], "partition": t.partition[i],
                "raw_shares": "parent" if t.use_parent[i] else int(t.shares[i]),
                "norm_shares": num(r.norm_shares[i]), "raw_usage": num(t.usage[i]),
                "norm_usage": num(r.norm_usage[i]), "effective_usage": num(r.effective_usage[i]),
                "level_fs": num(r.level_fs[i]), "fairshare": num(r.fairshare[i]),
                "rank": int(self.rank[i]) if t.is_user[i] else None, "children": int(self.children[i])}

    def path(self, i: int) -> list[int]:
        """Root down to ``i``."""
        chain = [i]
        while chain[-1] > 0:
            chain.append(int(self.result.tree.parent[chain[-1]]))
        return chain[::-1]

    def under(self, parent: int, depth: int) -> np.ndarray:
        """The rows below ``parent`` down to ``depth`` levels, in tree order (a slice of the preorder)."""
        rows = np.arange(parent + 1, self.end[parent], dtype=np.int64)
        return rows[self.depth[rows] <= self.depth[parent] + depth]

    def fairshare_of_job(self, row: int) -> float:
        """The factor sprio uses for a job: its association's, 0 without one or where blank."""
        a = int(self.job_assoc[row])
        v = float(self.result.fairshare[a]) if a >= 0 else 0.0
        return 0.0 if math.isnan(v) else v

    def job_summary(self, row: int) -> dict:
        """A pending job as the API's Job."""
        jt = self.jobs
        return {"job_id": jt.value("job_id", row), "display_id": jt.value("display_id", row),
                "account": jt.value("account", row), "partition": jt.value("partition", row),
                "qos": jt.value("qos", row), "priority": jt.value("priority", row),
                "fairshare": self.fairshare_of_job(row), "reason": jt.value("reason", row)}

    def index(self) -> AssocLookup:
        """The associations by (account, user, partition), as ``engine.ranks.assoc_index``'s dict
        answers ``get``, from the name indexes (no 100,000-entry dict per request)."""
        return AssocLookup(self)

    def nbytes(self) -> int:
        """The bytes of this view's arrays (the engine's and its own; the name lists' strings not counted)."""
        r = self.result
        arrays = [r.norm_shares, r.norm_usage, r.effective_usage, r.level_fs, r.fairshare, self.rank,
                  self.depth, self.children, self.end, self.job_assoc, r.tree.parent, r.tree.is_user,
                  r.tree.use_parent, r.tree.shares, r.tree.usage]
        if r.fs_raw is not None:
            arrays.append(r.fs_raw)
        idx = [self.users, self.accounts, self.jobs_by_user]
        return (sum(a.nbytes for a in arrays) + sum(x.order.nbytes + x.starts.nbytes for x in idx)
                + self.jobs.nbytes())


class AssocLookup(Mapping[tuple, int]):
    """(account, user, partition) → the association's row (``get`` answers None for none): see
    :meth:`View.index`.  A Mapping over the view's rows, searched through the name indexes."""

    def __init__(self, view: View):
        self.view = view

    def __getitem__(self, key: tuple) -> int:
        account, user, _ = key
        v = self.view
        rows = v.users.rows(user) if user is not None else v.accounts.rows(account)
        for i in rows.tolist():
            if v.key(i) == key:
                return i
        raise KeyError(key)

    def __iter__(self) -> Iterator[tuple]:
        return (self.view.key(i) for i in range(self.view.n))

    def __len__(self) -> int:
        return self.view.n


def _subtree_end(tree, depth: np.ndarray) -> np.ndarray:
    """end[i] = i + the size of i's subtree (the tree's order is a preorder: module tree.py)."""
    size = np.ones(tree.n, dtype=np.int64)
    for d in range(int(depth.max()), 0, -1):
        rows = np.flatnonzero(depth == d)
        np.add.at(size, tree.parent[rows], size[rows])
    return np.arange(tree.n, dtype=np.int64) + size


def build_view(res: CycleResult, engine_params: Params) -> View:
    """The view of a cycle that computed a result (``res.snapshot`` and ``res.result`` set)."""
    snap, result = res.snapshot, res.result
    if snap is None or result is None:  # ViewKeeper.publish builds none for such a cycle
        raise ValueError(f"cycle {res.number} ({res.outcome}) computed no result to view")
    tree = result.tree
    depth = tree.depth.astype(np.int32)
    index = assoc_index(result)
    jobs = JobTable.build(snap.jobs)
    assoc = np.fromiter((-1 if (a := job_assoc(j, index)) is None else a for j in snap.jobs),
                        dtype=np.int32, count=len(snap.jobs))
    del index
    if snap.evaluated_at is not None:
        at, at_is = int(snap.evaluated_at), "the snapshot's time"
    else:
        at, at_is = int(res.started), "the cycle's start"
    return View(
        number=res.number, evaluated_at=at, evaluated_at_is=at_is, result=result,
        rank=result.user_ranks(), depth=depth,
        children=np.bincount(tree.parent[1:], minlength=tree.n).astype(np.int32),
        end=_subtree_end(tree, depth),
        users=NameIndex.build(tree.user),
        accounts=NameIndex.build(tree.account),
        user_count=int(tree.is_user.sum()), jobs=jobs, job_assoc=assoc,
        jobs_by_user=NameIndex.build([jobs.values["user"][c] for c in jobs.codes["user"].tolist()]),
        settings=snap.settings, cluster=snap.cluster_info or ClusterInfo(),
        has_details=snap.cluster_info is not None, sibling_order=snap.sibling_order,
        engine_params=engine_params)
