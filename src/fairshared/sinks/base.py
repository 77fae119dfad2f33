"""The small interface job updaters implement (one per file: command-line tools, pyslurm)."""

from __future__ import annotations

from typing import Protocol

from ..records import PushAction

PUSH_MODES = ("site_factor", "nice", "priority", "off")


class JobUpdater(Protocol):
    name: str

    def apply(self, action: PushAction) -> None:
        """Write one action; raise JobGone if the job is no longer pending, PushError otherwise."""
        ...
