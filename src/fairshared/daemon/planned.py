"""What ``fairshared run --once`` prints on standard output: the cycle's values, not only counts.

Pure: from the finished :class:`~fairshared.cycle.CycleResult` to text.  With ``--dry-run`` it is
what the configuration would push (the README's "see what a config would push"); without, what
the cycle pushed.  The log line on standard error still carries the counts.
"""

from __future__ import annotations

from ..cycle import CycleResult


def _v(x) -> str:
    return "-" if x is None else str(x)


def render_planned(res: CycleResult) -> str:
    """One line per planned job update (``JOBID USER ACCOUNT FIELD OLD NEW W·F``) or association
    Priority (push mode ``assoc_priority``; NEW ``-`` clears it), under a line saying whether they
    were pushed; a failed cycle says why instead (nothing was computed or nothing pushed)."""
    verb = "would be pushed (dry run: nothing written)" if res.dry_run else "pushed"
    if res.outcome in ("pull_failed", "compute_failed"):
        return f"cycle {res.number}: {res.outcome}: {res.error}; nothing computed, nothing pushed\n"
    out = []
    if res.assoc_actions or res.push_mode == "assoc_priority":
        acts = res.assoc_actions
        out.append(f"cycle {res.number}, push mode {res.push_mode}: {len(acts)} association priorities {verb}")
        if res.blocked:
            out.append(f"  nothing may be written: {res.blocked}")
        if acts:
            out.append(f"  {'ACCOUNT':<16} {'USER':<12} {'PARTITION':<10} {'OLD':>11} {'NEW':>11} {'W*F':>11}")
        for a in acts:
            out.append(f"  {a.account:<16} {a.user or '':<12} {a.partition or '':<10} {_v(a.old):>11} "
                       f"{_v(a.new):>11} {a.contribution:>11}")
    else:
        updates = res.actions
        out.append(f"cycle {res.number}, push mode {res.push_mode}: {len(updates)} job updates {verb}"
                   + (f", {res.deferred} deferred" if res.deferred else ""))
        if updates:
            out.append(f"  {'JOBID':>10} {'USER':<12} {'ACCOUNT':<16} {'FIELD':<12} {'OLD':>11} {'NEW':>11} {'W*F':>11}")
        for u in updates:
            out.append(f"  {u.job_id:>10} {u.user:<12} {u.account:<16} {u.field:<12} {_v(u.old):>11} "
                       f"{u.new:>11} {u.contribution:>11}")
    if res.outcome == "push_failed" and not res.blocked:
        out.append(f"  push failed: {res.error}")
    return "\n".join(out) + "\n"


__all__ = ["render_planned"]
