"""``usage.origin = accounting``: a source that wraps another and replaces its usage.

The inner source reads the tree, settings and jobs as usual; :class:`AccountingUsage` then works the
raw usage out again from slurmdbd's job records (:func:`fairshared.usage_charge.compute_usage`, with
slurmctld's own decay, ``model`` ``slurm``, or the closed-form integral, ``exact``) and puts it on
the associations.  The job records are fetched incrementally by one reader kept across snapshots:
sacct through the inner source's command-line tools, or the inner source's own reader when it has
one (:class:`~.base.ReadsJobRecords`: pyslurm's ``pyslurm.db.Jobs``).  The usage settings are read
with the command-line tools either way, so an inner source without them
(:class:`~.base.UsesCommandLine`: the demo) is refused when the wrapper is built.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..logs import get_logger
from ..model import Snapshot
from ..records import SourceError
from ..usage_charge import compute_usage
from .base import ReadsJobRecords, Source, UsesCommandLine
from .sacct import load_accounting, new_sacct_reader


@dataclass
class _Records:
    """The incremental job-records reader, made at the first snapshot and shared by the wrappers a
    reload makes of the same source (:meth:`AccountingUsage.with_model`)."""

    reader: object = None


class AccountingUsage(Source, UsesCommandLine):
    """A :class:`~.base.Source`: ``inner``'s snapshot with the usage from slurmdbd's job records
    (``model``: ``slurm`` or ``exact``); its ``source`` text says so."""

    def __init__(self, inner: Source, model: str, *, records: _Records | None = None):
        if not isinstance(inner, UsesCommandLine):
            raise SourceError(f"usage.origin 'accounting' needs Slurm's command-line tools "
                              f"(source: {inner.name})")
        self.inner = inner
        self.model = model
        self.name = inner.name
        self.reads_details = inner.reads_details
        self._records = records if records is not None else _Records()
        self.log = get_logger()

    @property
    def cli(self):
        """The command-line reader the usage settings (and sacct, unless the inner source reads job
        records itself) go through."""
        return self.inner.cli

    def with_model(self, model: str) -> AccountingUsage:
        """The same wrapper with another ``model`` (a reload): the job records already fetched are kept."""
        return AccountingUsage(self.inner, model, records=self._records)

    def snapshot(self, *, jobs: bool = True, details: bool = False) -> Snapshot:
        return self.replace_usage(self.inner.snapshot(jobs=jobs, details=details))

    def replace_usage(self, snap: Snapshot) -> Snapshot:
        """``snap`` with slurmctld's usage replaced by the one from the job records (fetched
        incrementally)."""
        cli = self.cli
        at = time.time()
        if self._records.reader is None:  # sacct, or pyslurm.db.Jobs with the pyslurm source
            inner = self.inner
            self._records.reader = (inner.job_records_reader() if isinstance(inner, ReadsJobRecords)
                                    else new_sacct_reader(cli))
        snap, bad = usage_from_records(snap, cli, self.model, at, self._records.reader)
        if bad:
            self.log.warning("job records skipped", count=len(bad),
                             example=f"job {bad[0].job_id}: {bad[0].reason}")
        return snap


def usage_from_records(snap: Snapshot, cli, model: str, at: float, reader=None) -> tuple[Snapshot, list]:
    """``snap`` with its usage worked out at ``at`` from slurmdbd's job records (``model``), and the
    records skipped as bad (sacct's and the computation's).  ``cli``: the command-line reader of the
    usage settings and, without ``reader`` (an incremental reader kept by the caller), of sacct.  The
    one computation behind :class:`AccountingUsage` and ``fairshared compute --usage accounting``."""
    _, policy, records, bad = load_accounting(cli, snap.settings, at, sacct=reader)
    result = compute_usage(records, snap.associations, policy, at, [model])
    return (replace(snap, associations=result.associations(snap.associations, model),
                    source=f"{snap.source or 'slurm-cli'}; usage from sacct ({model} model)"),
            list(bad) + list(result.bad))
