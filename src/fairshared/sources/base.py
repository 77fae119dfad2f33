"""The one small interface every source implements (node_exporter style: one per file)."""

from __future__ import annotations

from typing import Protocol

from ..model import Snapshot


class SourceError(RuntimeError):
    """Reading the cluster failed or gave an inconsistent picture; nothing may be pushed."""


class SourceTimeout(SourceError):
    """A Slurm command did not answer within the source's timeout: its daemon is hung or gone.

    Never a reason to try another command against the same daemon in the same read (a fallback
    would wait on it again, and succeed on whatever it answers once it wakes up)."""


class Source(Protocol):
    """Where a cycle's snapshot comes from.

    ``snapshot()`` returns one *complete and consistent* picture — association
    tree with usage and sibling order, the priority configuration
    (``Snapshot.config``, keys as in :func:`fairshared.slurm.config.priority_config`)
    and the pending jobs — or raises :class:`SourceError` naming what failed.
    A partial snapshot is never returned.
    """

    name: str

    def snapshot(self, *, jobs: bool = True) -> Snapshot: ...
