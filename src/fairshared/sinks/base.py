"""The small interface job updaters implement (one per file: command-line tools, pyslurm, the demo)."""

from __future__ import annotations

from typing import Protocol, Sequence, Union

from ..records import AssocPriority, JobGone, PushAction, PushError

PUSH_MODES = ("site_factor", "nice", "priority", "assoc_priority", "off")

Outcome = Union[None, JobGone, PushError]
"""What became of one action: None (written), JobGone (not an error) or PushError."""


class JobUpdater(Protocol):
    """Everything the daemon's runner uses of an updater.  Each updater names it
    (``class CliUpdater(JobUpdater)``), so a type checker holds each one to it."""

    name: str

    def apply(self, action: PushAction) -> None:
        """Write one action; raise JobGone if the job is no longer pending, PushError otherwise."""
        ...

    def apply_many(self, actions: Sequence[PushAction]) -> list[Outcome]:
        """Write ``actions`` (one batch of the push); one outcome per action, in order.  An updater
        that has no batched write uses :func:`apply_each` (or :class:`AppliesEach`)."""
        ...


def apply_each(updater: JobUpdater, actions: Sequence[PushAction]) -> list[Outcome]:
    """``apply_many`` one action at a time: each one's JobGone or PushError becomes its outcome."""
    out: list[Outcome] = []
    for a in actions:
        try:
            updater.apply(a)
            out.append(None)
        except (JobGone, PushError) as exc:
            out.append(exc)
    return out


class AppliesEach:
    """A mixin for a :class:`JobUpdater`: ``apply_many`` as :func:`apply_each` over the class's own
    ``apply`` (``class DemoUpdater(AppliesEach, JobUpdater)``: the mixin first, so that its
    ``apply_many`` is the one called)."""

    def apply_many(self: JobUpdater, actions: Sequence[PushAction]) -> list[Outcome]:
        return apply_each(self, actions)


class AssocWriter(Protocol):
    """Reads and writes associations' own Priority (push mode ``assoc_priority`` and the way back);
    each writer names it (``class SacctmgrAssocs(AssocWriter)``)."""

    name: str
    requests: int  # slurmdbd requests sent so far

    def read(self, cluster: str | None) -> list[AssocPriority]:
        """Every association of ``cluster`` with its own Priority; PushError (or SourceError) on failure."""
        ...

    def write(self, cluster: str | None, ids: Sequence[int], value: int | None) -> None:
        """Set the own Priority of ``ids`` to ``value`` (None: clear); PushError when refused."""
        ...
