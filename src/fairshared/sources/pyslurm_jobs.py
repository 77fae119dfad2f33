"""Job records from slurmdbd through pyslurm 25.11 (``pyslurm.db.Jobs``), for usage from accounting.

The same records as :mod:`fairshared.sources.sacct`, read with
``pyslurm.db.Jobs.load(pyslurm.db.JobFilter(start_time=S, end_time=E))``
(pyslurm 25.11.2, ``pyslurm/db/job.pyx`` / ``job.pxd``):

* the window is always explicit: a falsy ``start_time`` makes slurmdbd default
  to midnight today.  With both bounds slurmdbd selects jobs eligible before E
  that ended at or after S or have not ended (overlap semantics, like sacct), so
  running jobs come back in every window;
* ``JobFilter`` has no state filter (``_parse_state`` is a TODO), so jobs that
  never started (``start_time`` None: pending, cancelled before start) are
  skipped here;
* ``Job.allocated_tres`` is a ``TrackableResources`` (None while pending): a
  mapping of ``TrackableResource`` objects with ``type``, ``name`` and
  ``count`` (memory in MB); older builds expose ``cpu``/``mem``/``node``/
  ``billing`` attributes and a ``gres`` dict instead; both are read;
* pyslurm's QOS objects carry no UsageFactor, so the factors come from the
  caller (``sacctmgr -nP show qos format=name,usagefactor``);
* jobs seen running whose end fell before the new window are re-read with
  ``JobFilter(ids=[...])``.

pyslurm is imported lazily (importing it initialises libslurm); a module can
be passed in instead, which is how the tests run without Slurm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..records import SourceError
from ..slurm.units import NO_VAL64
from ..usage import BadRecord, JobRecord, report_bad
from .sacct import IncrementalJobs

_NODE_TRES = ("cpu", "mem", "node", "billing", "energy")


def _tres_key(t: Any, default: str) -> str:
    typ = getattr(t, "type", None)
    name = getattr(t, "name", None)
    if typ:
        return (f"{typ}/{name}" if name else str(typ)).lower()
    return str(default).lower()


def _count(t: Any) -> float | None:
    c = getattr(t, "count", t)
    if c is None:
        return None
    c = float(c)
    if c >= NO_VAL64:  # NO_VAL64 / INFINITE64: not a count
        return None
    return c


def tres_from_pyslurm(at: Any) -> dict[str, float]:
    """A pyslurm ``TrackableResources`` (or None) → {name: count}; raises ValueError on negative counts."""
    out: dict[str, float] = {}
    if at is None:
        return out
    if isinstance(at, Mapping):
        for key, t in at.items():
            c = _count(t)
            if c is not None:
                out[_tres_key(t, key)] = c
    else:
        for name in _NODE_TRES:
            t = getattr(at, name, None)
            c = _count(t) if t is not None else None
            if c is not None:
                out[name] = c
        for key, t in (getattr(at, "gres", None) or {}).items():
            c = _count(t)
            if c is not None:
                out[_tres_key(t, f"gres/{key}") if getattr(t, "type", None) else f"gres/{key}".lower()] = c
    for k, v in out.items():
        if v < 0 or math.isnan(v):
            raise ValueError(f"negative TRES {k}={v:g}")
    return out


def _epoch(v: Any) -> float | None:
    if v is None:
        return None
    if hasattr(v, "timestamp"):
        return float(v.timestamp())
    v = float(v)
    return v if v > 0 else None


def records_from_jobs(jobs: Iterable[Any], qos_factors: Mapping[str, float] | None = None,
                      cluster: str | None = None) -> tuple[list[JobRecord], list[BadRecord], set]:
    """pyslurm ``db.Job`` objects → (records, bad records, ids of running jobs)."""
    qos_factors = qos_factors or {}
    records, bad, running = [], [], set()
    for j in jobs:
        jid = getattr(j, "id", None)
        if cluster is not None and getattr(j, "cluster", cluster) not in (cluster, None):
            continue
        if jid is None:  # nothing to merge its later reads by (sacct's rows always have one)
            bad.append(BadRecord("?", "no job id"))
            continue
        try:
            start = _epoch(getattr(j, "start_time", None))
            end = _epoch(getattr(j, "end_time", None))
        except (TypeError, ValueError):
            bad.append(BadRecord(jid, "unreadable start/end time"))
            continue
        if start is None:
            continue  # never started: no usage
        if end is not None and end < start:
            bad.append(BadRecord(jid, f"ends ({end:.0f}) before it starts ({start:.0f})"))
            continue
        try:
            tres = tres_from_pyslurm(getattr(j, "allocated_tres", None))
        except (TypeError, ValueError) as exc:
            bad.append(BadRecord(jid, f"allocated TRES: {exc}"))
            continue
        qos = getattr(j, "qos", None) or ""
        user = getattr(j, "user_name", None) or None
        records.append(JobRecord(job_id=jid, assoc=(j.account, user, None), start=start, end=end, tres=tres,
                                 partition=getattr(j, "partition", None) or None,
                                 qos_usage_factor=float(qos_factors.get(qos, 1.0))))
        if end is None:
            running.add(jid)
    return records, bad, running


def _values(jobs: Any) -> Iterable[Any]:
    return jobs.values() if hasattr(jobs, "values") else jobs


@dataclass
class PyslurmJobs:
    """Job records through ``pyslurm.db.Jobs.load``, fetched incrementally (see :mod:`.sacct`)."""

    qos_factors: Callable[[], Mapping[str, float]] | Mapping[str, float] | None = None
    pyslurm: Any = None
    overlap: float = 300.0
    chunk: int = 500
    cluster: str | None = None
    # None: made from ``overlap`` (__post_init__); tests hand one in
    state: IncrementalJobs = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        if self.state is None:
            self.state = IncrementalJobs(overlap=self.overlap)

    def _module(self):
        if self.pyslurm is None:
            try:
                import pyslurm  # noqa: PLC0415 - lazy: importing initialises libslurm
            except ImportError as exc:
                raise SourceError(f"pyslurm is not available: {exc}") from None
            self.pyslurm = pyslurm
        return self.pyslurm

    def _load(self, **kw) -> list[Any]:
        ps = self._module()
        err = getattr(ps, "PyslurmError", None) or getattr(ps, "RPCError", None) or RuntimeError
        try:
            return list(_values(ps.db.Jobs.load(ps.db.JobFilter(**kw))))
        except err as exc:  # pyslurm.RPCError derives from PyslurmError
            raise SourceError(f"pyslurm.db.Jobs.load failed: {exc}") from None

    def fetch(self, now: float | None = None,
              not_before: float | None = None) -> tuple[list[JobRecord], list[BadRecord]]:
        """Bring the records up to ``now`` and return all that still matter (and the bad ones)."""
        now = time.time() if now is None else now
        q = self.qos_factors() if callable(self.qos_factors) else (self.qos_factors or {})
        lo, hi = self.state.window(now, not_before)
        # explicit integer bounds: a falsy start_time would mean "since midnight"
        start = max(int(lo), 1)
        recs, bad, running = records_from_jobs(self._load(start_time=start, end_time=int(math.ceil(hi))), q,
                                               self.cluster)
        got = {r.job_id for r in recs}
        missing = sorted(self.state.running - got - running, key=str)
        for i in range(0, len(missing), self.chunk):
            more = self._load(ids=list(missing[i:i + self.chunk]), start_time=max(int(not_before or 1), 1),
                              end_time=int(math.ceil(hi)))
            r2, b2, run2 = records_from_jobs(more, q, self.cluster)
            recs += r2
            bad += b2
            running |= run2
        report_bad(self.state.merge(recs, bad, running, now, not_before), "pyslurm.db.Jobs")
        return self.state.snapshot()
