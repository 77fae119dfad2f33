"""The small interfaces sources implement (node_exporter style: one source per file)."""

from __future__ import annotations

from typing import Protocol

from ..model import Snapshot


class Source(Protocol):
    """Where a cycle's snapshot comes from: everything a caller (the daemon's runner and service)
    uses of a source.

    ``snapshot()`` returns one *complete and consistent* picture — association tree with usage and
    sibling order, the cluster's priority settings (``Snapshot.settings``) and, with ``jobs``, the
    pending jobs — or raises :class:`fairshared.records.SourceError` naming what failed.  A partial
    snapshot is never returned.

    ``details=True`` reads besides what the job priority needs (push mode ``priority``): the
    snapshot's ``cluster_info`` (partitions, QOS, node and CPU counts), each job with its priority
    factors' inputs, slurmctld's last calculation and the read's warnings, all in the same read (each
    command once).  A source that cannot read them says so statically, ``reads_details = False``
    (the service refuses push mode ``priority`` with it at start-up), and raises SourceError naming
    why when asked.
    """

    name: str
    reads_details: bool

    def snapshot(self, *, jobs: bool = True, details: bool = False) -> Snapshot: ...

