"""The one small interface every source implements (node_exporter style: one per file)."""

from __future__ import annotations

from typing import Protocol

from ..model import Snapshot


class Source(Protocol):
    """Where a cycle's snapshot comes from.

    ``snapshot()`` returns one *complete and consistent* picture — association
    tree with usage and sibling order, the priority configuration
    (``Snapshot.config``, keys as in :func:`fairshared.slurm.config.priority_config`)
    and the pending jobs — or raises :class:`fairshared.records.SourceError` naming what failed.
    A partial snapshot is never returned.
    """

    name: str

    def snapshot(self, *, jobs: bool = True) -> Snapshot: ...
