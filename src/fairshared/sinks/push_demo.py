"""The demo's job updater: ``fairshared run --demo`` pushes into the simulated cluster.

It writes into a :class:`fairshared.sources.demo.DemoCluster` (its ``pending()``, ``lock`` and
``pushed``), which the daemon hands to both the demo source and this updater; the sinks do not
import the sources, so the cluster is taken as it comes.
"""

from __future__ import annotations

from ..records import JobGone, PushAction
from .base import AppliesEach, JobUpdater


class DemoUpdater(AppliesEach, JobUpdater):
    name = "demo"

    def __init__(self, cluster):
        self.cluster = cluster

    def apply(self, action: PushAction) -> None:
        c = self.cluster
        if not c.pending(action.job_id):
            raise JobGone(f"job {action.job_id} is no longer pending")
        with c.lock:
            fields = c.pushed.setdefault(action.job_id, {})
            if action.field == "priority":  # as scontrol update Priority=: fixed from now on
                fields.update(priority=action.new, direct_set_prio=True)
            elif action.field == "release":  # as scontrol release: recalculated again, nice reset to 0
                fields.pop("priority", None)
                fields.update(direct_set_prio=False, nice=0)
            else:
                fields[action.field] = action.new
