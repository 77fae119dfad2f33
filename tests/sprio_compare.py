"""Comparing ``sprio -l`` with ``fairshared sprio`` and sshare's classic FairShare with ours, within
what the usage we read can tell: the helpers test_sprio_slurm, test_site_settings_slurm and
test_slurm_differential share (and tests/test_sprio_edge.py checks offline).

The command-line source reads each association's usage from ``scontrol show assoc_mgr``, printed
to 2 decimals: an absolute error E <= 0.005 per association (test_slurm_differential's docstring
derives what that does to each sshare column).
"""

from __future__ import annotations

import math
from pathlib import Path

import slurm_cluster as sc

from fairshared.commands.common import engine_result
from fairshared.engine.ranks import assoc_index, fairshare_of, job_assoc
from fairshared.explain_common import details
from fairshared.inputs.priority_snapshot import load_inputs_file
from fairshared.priority_sprio import sprio

E = 0.005  # assoc_mgr prints UsageRaw to 2 decimals

SPRIO_COLUMNS = [("job_id", 15), ("partition", 9), ("user", 8), ("priority", 10), ("site", 10), ("age", 10),
                 ("assoc", 10), ("fairshare", 10), ("jobsize", 10), ("partition_factor", 10), ("qos", 10),
                 ("nice", 11), ("tres", 20)]
if sc.SERIES >= (23, 2):  # sprio -l shows ACCOUNT (%.8o) after USER and QOSNAME (%.10n) before QOS
    SPRIO_COLUMNS[3:3] = [("account", 8)]
    SPRIO_COLUMNS[11:11] = [("qos_name", 10)]


def usage_tolerance(snapshot, tree):
    """How far each association's (tree row's) classic EffectvUsage may be from slurmctld's, the usage
    being read to 2 decimals: 2E/u_min relatively per ratio, times the depth (test_slurm_differential's docstring derives it)."""
    used = [a.usage for a in snapshot.associations if a.usage and a.usage > 0]
    rel = 2 * E / min(used) if used else 0.0
    return rel, [rel * max(1, int(d)) for d in tree.depth]


def classic_fs_tolerance(f, norm_shares, u_tol):
    """How far classic's F = 2^(-UE/S/d) may be from slurmctld's when UE is off by ``u_tol``:
    F·ln2·u_tol/S (d >= 1 left out: an upper bound); 0 where F is blank or S is 0."""
    if f is None or not norm_shares or math.isnan(float(f)) or math.isnan(float(norm_shares)):
        return 0.0
    return float(f) * math.log(2) * u_tol / float(norm_shares)


def fs_tolerances(snapshot, result) -> dict[int, float]:
    """How far each association's (result row's) F may be from slurmctld's, given the snapshot's
    2-decimal usage: :func:`classic_fs_tolerance` under classic; none (empty) under Fair Tree, whose
    F is a rank."""
    if result.algorithm != "classic":
        return {}
    _, row_tol = usage_tolerance(snapshot, result.tree)
    return {i: classic_fs_tolerance(float(result.fairshare[i]), float(result.norm_shares[i]), row_tol[i])
            for i in range(result.tree.n)}


def unexplained(their_rows: list[list[str]], our_rows: list[list[str]], snapshot: Path) -> list[str]:
    """The rows where sprio and we differ by more than the usage we read can tell apart.

    The CLI reads each association's usage to 2 decimals (``scontrol show assoc_mgr``), so classic's F
    may be off by :func:`classic_fs_tolerance`, the differential test's tolerance.
    Weighted, that moves FAIRSHARE and the sum under PRIORITY by a few thousandths of a point: when
    slurmctld's sum lies that close to a whole number, its PRIORITY (truncated) or FAIRSHARE (rounded)
    can be 1 off ours, and neither side is wrong.  A row passes when every cell equals ours except
    FAIRSHARE and PRIORITY, and those lie between what we compute with F lowered and raised by that
    tolerance.  Fair Tree's F is a rank: no tolerance."""
    if their_rows == our_rows:
        return []
    pi = load_inputs_file(str(snapshot))
    result = engine_result(pi)
    bounds = fs_tolerances(pi, result)
    index, fs = assoc_index(result), fairshare_of(result)

    def shifted(sign):
        def f(job):
            i = job_assoc(job, index)
            return fs(job) + sign * bounds.get(i, 0.0) if i is not None else fs(job)
        return [cells_of_json(r.as_json()) for r in sprio(pi.jobs, f, details(pi), pi.settings, int(pi.evaluated_at))]

    low, high = shifted(-1), shifted(+1)
    names = [n for n, _ in SPRIO_COLUMNS]
    loose = {names.index("fairshare"), names.index("priority")}
    bad = []
    if not (len(their_rows) == len(our_rows) == len(low) == len(high)):
        return [f"{len(their_rows)} sprio rows, {len(our_rows)} of ours"]
    for theirs, ours, lo, hi in zip(their_rows, our_rows, low, high):
        fine = all(theirs[c] == ours[c] if c not in loose else int(lo[c]) <= int(theirs[c]) <= int(hi[c])
                   for c in range(len(names)))
        if not fine:
            bad.append(f"sprio {theirs}\nours  {ours} (F lowered: {lo}, raised: {hi})")
    return bad


def assert_sprio_equal(theirs: str, ours: dict, table: str, snapshot: Path, label: str) -> None:
    """``sprio -l`` (``theirs``) against ``fairshared sprio``'s JSON (``ours``) cell by cell, a
    PRIORITY or FAIRSHARE 1 off passing only where :func:`unexplained` says the usage cannot tell;
    and against our table (``table``) byte for byte when no cell is off."""
    their_rows = cells_of_sprio(theirs)
    our_rows = [cells_of_json(r) for r in ours["jobs"]]
    both = f"\n--- sprio -l\n{theirs}--- fairshared\n{table}"
    bad = unexplained(their_rows, our_rows, snapshot)
    assert bad == [], f"{label}:\n" + "\n".join(bad) + both
    if our_rows == their_rows:  # (a cell 1 off at a rounding edge, passed above, would differ here)
        assert table == theirs, f"{label}:" + both


def cells_of_sprio(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines()[1:]:
        cells, pos = [], 0
        for _, width in SPRIO_COLUMNS:
            cells.append(line[pos:pos + width].strip())
            pos += width + 1
        rows.append(cells)
    return rows


def cells_of_json(record: dict) -> list[str]:
    tres = ",".join(f"{k}={v}" for k, v in record["tres"].items())
    record = {**record, "qos_name": record.get("qos_name") or "(null)"}  # no QOS: sprio prints C's NULL
    return [str(record[name] if name != "tres" else tres)[:width] for name, width in SPRIO_COLUMNS]
