"""The demo's association writer: push mode ``assoc_priority`` into the simulated cluster.

It reads and writes the :class:`fairshared.sources.demo.DemoCluster`'s ``assoc_priority`` (by
association id), as :class:`~fairshared.sinks.assoc_cli.SacctmgrAssocs` does slurmdbd's.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import AssocPriority, PushError
from .base import AssocWriter


class DemoAssocs(AssocWriter):
    name = "demo"

    def __init__(self, cluster):
        self.cluster = cluster
        self.requests = 0

    def read(self, cluster: str | None) -> list[AssocPriority]:
        self.requests += 1
        return self.cluster.assoc_rows()

    def write(self, cluster: str | None, ids: Sequence[int], value: int | None) -> None:
        self.requests += 1
        c = self.cluster
        known = {r.id for r in c.assoc_rows()}
        missing = [i for i in ids if i not in known]
        if missing:
            raise PushError(f"association id {missing[0]} is not in the demo cluster")
        with c.lock:
            for i in ids:
                if value is None:
                    c.assoc_priority.pop(i, None)
                else:
                    c.assoc_priority[i] = int(value)
