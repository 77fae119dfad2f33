"""Ranks over a :class:`~fairshared.engine.result.Result`: which association a job belongs to, its
factor, competition ranks and Kendall's tau-b between two orders.

Pure, like the rest of the engine: numpy and :mod:`fairshared.model` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..model import Job
from .result import Result

__all__ = ["AssocIndex", "assoc_index", "competition_ranks", "fairshare_of", "job_assoc", "kendall_tau_b"]


# Associations by key, (account, user, partition) → row: :func:`assoc_index`'s dict, or the API's
# ``AssocLookup``, a Mapping that finds a row without building the dict.
AssocIndex = Mapping[tuple, int]


def assoc_index(result: Result) -> dict[tuple, int]:
    t = result.tree
    return {t.key(i): i for i in range(t.n)}


def job_assoc(job: Job, index: AssocIndex) -> int | None:
    """The job's association: (account, user, partition) if such a per-partition one exists, else (account, user)."""
    for part in job.partitions:
        i = index.get((job.account, job.user, part))
        if i is not None:
            return i
    return index.get((job.account, job.user, None))


def fairshare_of(result: Result, index: AssocIndex | None = None) -> Callable[[Job], float]:
    """The fair-share factor of a job's association (0 without one, or where blank).  ``index``:
    :func:`assoc_index` of ``result``, or the API's ``AssocLookup`` (a Mapping that finds a row
    without building the dict; built here when None)."""
    index = assoc_index(result) if index is None else index

    def fs(job: Job) -> float:
        i = job_assoc(job, index)
        if i is None:
            return 0.0  # Slurm: a job without association gets 0 ("Unable to compute fairshare")
        v = float(result.fairshare[i])
        return 0.0 if math.isnan(v) else v

    return fs



def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two equally long sequences (NaN when undefined).

    tau_b = (C − D) / sqrt((n0 − n1)(n0 − n2)), n0 = n(n−1)/2, n1 and n2 the pairs
    tied in x and in y.  Written out here (O(n²) in numpy chunks) rather than
    pulling in scipy for one function; scipy.stats.kendalltau(x, y) gives the same.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("x and y differ in length")
    n = a.size
    if n < 2:
        return math.nan
    s = 0
    step = max(1, 1_000_000 // n)
    for start in range(0, n, step):
        sa = np.sign(a[start:start + step, None] - a[None, :])
        sb = np.sign(b[start:start + step, None] - b[None, :])
        s += int((sa * sb).sum())
    s //= 2  # every unordered pair was counted twice

    def tied(v: np.ndarray) -> int:
        _, counts = np.unique(v, return_counts=True)
        return int((counts * (counts - 1) // 2).sum())

    n0 = n * (n - 1) // 2
    denom = (n0 - tied(a)) * (n0 - tied(b))
    return s / math.sqrt(denom) if denom > 0 else math.nan


def competition_ranks(values: Sequence[float]) -> list[int]:
    """1 = largest; ties share the best rank ("1224")."""
    v = np.asarray(values, dtype=np.float64)
    desc = np.sort(v)[::-1]
    return [int(r) for r in 1 + np.searchsorted(-desc, -v, side="left")]

