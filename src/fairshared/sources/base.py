"""The small interfaces sources implement (node_exporter style: one source per file)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..model import Snapshot


class Source(Protocol):
    """Where a cycle's snapshot comes from: everything a caller (the daemon's runner, the service,
    :class:`~.accounting.AccountingUsage`) uses of a source.

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


@runtime_checkable
class UsesCommandLine(Protocol):
    """A source with Slurm's command-line tools at hand (``cli``: a
    :class:`~.slurm_cli.SlurmCli`, which is its own ``cli``): what the accounting usage needs for the
    usage settings and, unless the source reads job records itself, sacct."""

    @property
    def cli(self): ...


@runtime_checkable
class ReadsJobRecords(Protocol):
    """A source that reads slurmdbd's job records itself (pyslurm: ``pyslurm.db.Jobs``) instead of sacct."""

    def job_records_reader(self):
        """A new incremental reader of job records (``fetch(now=..., not_before=...)``, like
        :class:`~.sacct.SacctJobs`), kept across cycles by its user."""
        ...
