"""Compact columns for the API's view: the pending jobs as numpy arrays, and name → rows indexes.

The view outlives its cycle (it answers until the next one), so it keeps neither the snapshot's
:class:`~fairshared.model.Job` objects (~1 KB each with their strings and TRES dict: 100 MB at
100,000 jobs, alive beside the next cycle's pull) nor a dict per row: each field is one array (a
category code where the values repeat), and a job is rebuilt from them when a request needs it.
Pure: numpy and :mod:`fairshared.model` only.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any
from operator import attrgetter

import numpy as np

from ..model import Job

__all__ = ["JobTable", "NameIndex"]

_NONE = np.iinfo(np.int64).min  # an optional integer that is None (site_factor, time_limit)


@dataclass(frozen=True, eq=False)
class NameIndex:
    """Rows by name: ``rows(name)`` gives, in row order, the rows whose name is ``name``.

    ``names`` sorted (bisect finds a name), ``order`` the rows grouped by name, ``starts`` where
    each name's group begins (one more entry than names)."""

    names: list[str]
    order: np.ndarray  # int32
    starts: np.ndarray  # int64

    @classmethod
    def build(cls, keys: Sequence[str | None]) -> NameIndex:
        """From each row's name (None: the row is in no group, e.g. an account's user)."""
        names = sorted({k for k in keys if k is not None})
        code_of = {n: c for c, n in enumerate(names)}
        codes = np.fromiter((code_of[k] if k is not None else -1 for k in keys), dtype=np.int64, count=len(keys))
        order = np.argsort(codes, kind="stable").astype(np.int32)
        order = order[int((codes < 0).sum()):]  # the rows without a name sort first: drop them
        starts = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(np.bincount(codes[codes >= 0], minlength=len(names)), out=starts[1:])
        return cls(names, order, starts)

    def rows(self, name: str) -> np.ndarray:
        i = bisect.bisect_left(self.names, name)
        if i == len(self.names) or self.names[i] != name:
            return self.order[:0]
        return self.order[self.starts[i]:self.starts[i + 1]]


@dataclass(frozen=True, eq=False)
class JobTable:
    """The pending jobs, one array per :class:`Job` field (see the module docstring).

    ``ints``: the integer fields as int64 columns (None is :data:`_NONE`); ``codes`` and
    ``values``: the other fields as category codes into the list of their distinct values (a TRES
    mapping as a tuple of its items).  ``by_id``: rows sorted by job id, for :meth:`find`."""

    n: int
    ints: dict[str, np.ndarray]
    codes: dict[str, np.ndarray]
    values: dict[str, list]
    by_id: np.ndarray  # int32

    @classmethod
    def build(cls, jobs: Iterable[Job]) -> JobTable:
        jobs = list(jobs)
        ints, codes, values = {}, {}, {}
        for f in fields(Job):  # a field at a time: one list of n values alive, never n tuples of all
            name = f.name
            col = list(map(attrgetter(name), jobs))
            if name in _INTS:
                ints[name] = np.fromiter((_NONE if v is None else v for v in col), dtype=np.int64, count=len(jobs))
                continue
            if name == "tres":  # as items in the job's own order (a dict is rebuilt equal from them)
                col = [tuple(v.items()) if v else () for v in col]
            elif name == "display_id":  # most are the job id itself: kept as "" (one value for all)
                col = ["" if d == str(j) else d for d, j in zip(col, ints["job_id"].tolist())]
            seen: dict = {}
            codes[name] = np.fromiter((seen.setdefault(v, len(seen)) for v in col), dtype=np.int32, count=len(jobs))
            values[name] = list(seen)
        by_id = np.argsort(ints["job_id"], kind="stable").astype(np.int32)
        return cls(len(jobs), ints, codes, values, by_id)

    def job(self, row: int) -> Job:
        """The job of ``row``, rebuilt equal to the one the table was built from."""
        # Job's fields by name, each of its own type (int, str, bool, a TRES mapping) as the columns kept it
        kw: dict[str, Any] = {name: (None if (v := int(col[row])) == _NONE else v)
                              for name, col in self.ints.items()}
        for name, col in self.codes.items():
            kw[name] = self.values[name][int(col[row])]
        kw["tres"] = dict(kw["tres"])
        kw["direct_set_prio"] = bool(kw["direct_set_prio"])
        kw["display_id"] = kw["display_id"] or str(kw["job_id"])
        return Job(**kw)

    def value(self, name: str, row: int):
        """One field of one row (a category's value or an integer), without rebuilding the job."""
        if name in self.ints:
            v = int(self.ints[name][row])
            return None if v == _NONE else v
        v = self.values[name][int(self.codes[name][row])]
        return (v or str(int(self.ints["job_id"][row]))) if name == "display_id" else v

    def find(self, ref: str) -> int | None:
        """The row of the job ``ref`` names: its job id, else its display id (``123_4``); None if none."""
        if ref.isdigit() and len(ref) < 19:
            ids = self.ints["job_id"]
            i = int(np.searchsorted(ids, int(ref), sorter=self.by_id))
            if i < self.n and ids[self.by_id[i]] == int(ref):
                return int(self.by_id[i])
        try:
            code = self.values["display_id"].index(ref) if ref else -1
        except ValueError:
            return None
        hit = np.flatnonzero(self.codes["display_id"] == code)
        return int(hit[0]) if hit.size else None

    def nbytes(self) -> int:
        """The arrays' bytes (the distinct values' objects are shared with the strings kept elsewhere)."""
        return sum(a.nbytes for a in (*self.ints.values(), *self.codes.values(), self.by_id))


_INTS = ("job_id", "priority", "nice", "site_factor", "submit_time", "eligible_time", "accrue_time",
         "min_nodes", "cpus", "time_limit", "assoc_priority")
