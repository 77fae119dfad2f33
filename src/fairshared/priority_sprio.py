"""What ``sprio`` shows of a job's priority: its rows (one per partition, as slurmctld lists
them), sprio's rounding and column layout per release, and its ``-w`` weights.  Pure; the job's
priority itself is :mod:`fairshared.priority`'s."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .model import ClusterInfo, Job
from .settings import ClusterSettings
from .priority import (job_priority, nice_points, ordered_partitions, partition_factor,
                       site_points, wire)
from .slurm.units import NICE_OFFSET
from .slurm.versions import SPRIO_23_02

# --- what sprio shows --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SprioRow:
    """One line of ``sprio -l``: the weighted values as sprio received and prints them."""

    job_id: int
    partition: str
    user: str
    priority: int
    site: int
    age: float
    assoc: float
    fairshare: float
    jobsize: float
    partition_factor: float
    qos: float
    nice: int
    tres: tuple[tuple[str, float], ...]  # (name, weighted) for the non-zero ones, in TRES order
    account: str = ""
    qos_name: str = ""

    def as_json(self) -> dict:
        """The ``fairshared sprio --format json`` record: the numbers sprio prints, as integers."""
        return {
            "job_id": self.job_id,
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "qos_name": self.qos_name,
            "priority": self.priority,
            "site": self.site,
            "age": c_round(self.age),
            "assoc": c_round(self.assoc),
            "fairshare": c_round(self.fairshare),
            "jobsize": c_round(self.jobsize),
            "partition_factor": c_round(self.partition_factor),
            "qos": c_round(self.qos),
            "nice": self.nice,
            "tres": {name: c_round(v) for name, v in self.tres},
        }


def c_round(x: float) -> int:
    """The integer C's ``%.0f`` prints (round half to even on the binary double)."""
    return int(f"{x:.0f}")


def listed_by_sprio(job: Job, settings: ClusterSettings, now: int) -> bool:
    """Whether sprio lists the job (``priority_p_get_priority_factors_list``).

    Pending jobs (all jobs with CALCULATE_RUNNING), eligible by now (begin time, or
    submit time with ACCRUE_ALWAYS), not held (priority 0).
    """
    # listed ⇔ (PENDING or CALCULATE_RUNNING) ∧ 0 < use_time ≤ now ∧ priority ≠ 0
    # use_time = submit time with ACCRUE_ALWAYS, else the begin (eligible) time
    if "CALCULATE_RUNNING" not in settings.flags and job.state != "PENDING":
        return False
    use_time = job.submit_time if "ACCRUE_ALWAYS" in settings.flags else job.eligible_time
    if not use_time or use_time > now:
        return False
    return job.priority != 0


def sprio_rows(job: Job, fairshare: float, cluster: ClusterInfo, settings: ClusterSettings,
               now: int) -> list[SprioRow]:
    """The rows sprio prints for one job (one per partition, × QOS from 24.11), from ``job_priority``."""
    # weighted factors as sprio receives them (wire()), PRIORITY = trunc(max(1, Σ)) re-summed by sprio
    # range: PRIORITY [1, ∞) (no upper clamp); SITE/NICE −2^31 for an operator-set multi-partition job
    rows = []
    parts = ordered_partitions(job, cluster)
    for fac in job_priority(job, fairshare, cluster, settings, now):
        who = {"account": job.account, "qos_name": fac.qos}
        if fac.direct and (len(parts) == 1 or cluster.slurm_version >= SPRIO_23_02):
            # sprio gets direct_prio and prints it, with SITE 0 and NICE 0: for a job in one partition
            # always, in each partition of several from 23.02 (_create_prio_factors_obj)
            rows.append(SprioRow(job.job_id, fac.partition, job.user, int(float(fac.priority)), 0,
                                 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, (), **who))
            continue
        if fac.direct:
            # several partitions before 23.02: _filter_job copies the zeroed factors (site = nice = 0,
            # i.e. −2^31 once NICE_OFFSET is taken off) and fills in this partition's factor only
            part = cluster.partitions.get(fac.partition)
            w_part = wire(partition_factor(part, cluster, settings) * float(settings.weights["partition"]))
            site = nice = -NICE_OFFSET
            prio = w_part + float(site) - float(nice)
            rows.append(SprioRow(job.job_id, fac.partition, job.user, _sprio_priority(prio), site,
                                 0.0, 0.0, 0.0, 0.0, w_part, 0.0, nice, (), **who))
            continue
        w = {k: wire(v) for k, v in fac.weighted.items()}
        tres = tuple((k, wire(v)) for k, v in fac.tres_weighted.items() if v)
        p = (w["age"] + w["assoc"] + w["fairshare"] + w["jobsize"] + w["partition"] + w["qos"]
             + site_points(fac.site) - nice_points(fac.nice))
        for _, v in tres:
            p += v
        rows.append(SprioRow(job.job_id, fac.partition, job.user, _sprio_priority(p), fac.site,
                             w["age"], w["assoc"], w["fairshare"], w["jobsize"], w["partition"], w["qos"],
                             fac.nice, tres, **who))
    return rows


def _sprio_priority(p: float) -> int:
    # get_priority_from_factors: max(P, 1), printed with a (long long) cast; no upper clamp
    return math.trunc(p if p >= 1 else 1.0)


def sprio(jobs: Iterable[Job], fairshare_of, cluster: ClusterInfo, settings: ClusterSettings,
          now: int) -> list[SprioRow]:
    """Every row ``sprio -l`` shows, in its order (job id ascending, partitions as held).

    ``fairshare_of(job)`` returns the job's fair-share factor.
    """
    listed = sorted((j for j in jobs if listed_by_sprio(j, settings, now)), key=lambda j: j.job_id)
    rows: list[SprioRow] = []
    for j in listed:
        rows.extend(sprio_rows(j, fairshare_of(j), cluster, settings, now))
    return rows


# sprio -l's format (src/sprio/sprio.c), "%.N" = right-justified in N, "%N" = left-justified; both
# cut to N characters.  22.05: "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N
# %.20T"; from 23.02 ACCOUNT (%.8o) follows USER and QOSNAME (%.10n) comes before QOS.
SPRIO_LONG = (("JOBID", 15, True), ("PARTITION", 9, False), ("USER", 8, True), ("PRIORITY", 10, True),
              ("SITE", 10, True), ("AGE", 10, True), ("ASSOC", 10, True), ("FAIRSHARE", 10, True),
              ("JOBSIZE", 10, True), ("PARTITION", 10, True), ("QOS", 10, True), ("NICE", 11, True),
              ("TRES", 20, True))
SPRIO_LONG_23_02 = (*SPRIO_LONG[:3], ("ACCOUNT", 8, True), *SPRIO_LONG[3:10], ("QOSNAME", 10, True),
                    *SPRIO_LONG[10:])


def sprio_columns(version: tuple[int, int] = (22, 5)):
    return SPRIO_LONG_23_02 if version >= SPRIO_23_02 else SPRIO_LONG


def _cell(text: str, width: int, right: bool) -> str:
    # _print_str(): printf "%Ns" / "%.Ns" into a buffer of N+1 bytes (keeps the leftmost N), padded to N
    s = f"{text:>{width}}" if right else text[:width]
    return s[:width].ljust(width)


def sprio_cells(row: SprioRow, version: tuple[int, int] = (22, 5)) -> list[str]:
    tres = ",".join(f"{name}={v:.0f}" for name, v in row.tres)
    cells = [str(row.job_id), row.partition, row.user, str(row.priority), f"{float(row.site):.0f}",
             f"{row.age:.0f}", f"{row.assoc:.0f}", f"{row.fairshare:.0f}", f"{row.jobsize:.0f}",
             f"{row.partition_factor:.0f}", f"{row.qos:.0f}", f"{float(row.nice):.0f}", tres]
    if version >= SPRIO_23_02:
        # a job without a QOS (before 24.11: one submitted with --qos=a,b) has a NULL qos name,
        # which sprio hands to printf's %s: glibc prints "(null)" (seen on 23.11.11)
        cells = [*cells[:3], row.account, *cells[3:10], row.qos_name or "(null)", *cells[10:]]
    return cells


def render_sprio(rows: Iterable[SprioRow], header: bool = True, version: tuple[int, int] = (22, 5)) -> str:
    """``sprio -l`` of that Slurm release exactly: same columns, widths, justification, cutting and rounding."""
    columns = sprio_columns(version)
    lines = []
    if header:
        lines.append(" ".join(_cell(name, w, r) for name, w, r in columns))
    for row in rows:
        lines.append(" ".join(_cell(c, w, r) for c, (_, w, r) in zip(sprio_cells(row, version), columns)))
    return "".join(line + "\n" for line in lines)



def render_sprio_weights_long(settings: ClusterSettings, weight_tres_text: str | None = None,
                             version: tuple[int, int] = (22, 5)) -> str:
    """``sprio -l -w``: the long header and a ``Weights`` line under it (src/sprio/print.c, the
    ``(priority_factors_object_t *) -1`` row): SITE 1, every weight (0 too, ``%.0f``), TRES the
    configured string, the other columns blank."""
    if weight_tres_text is None and settings.tres_weights:
        weight_tres_text = ",".join(f"{k}={v:g}" for k, v in settings.tres_weights.items())
    weights = {"SITE": "1", "AGE": settings.weights["age"], "ASSOC": settings.weights["assoc"],
               "FAIRSHARE": settings.weights["fairshare"], "JOBSIZE": settings.weights["jobsize"],
               "QOS": settings.weights["qos"], "TRES": weight_tres_text or ""}
    columns = sprio_columns(version)
    cells = []
    for k, (name, _, _) in enumerate(columns):
        if k == 0:
            cells.append("Weights")
        elif name == "PARTITION" and k > 1:  # the second PARTITION column is the partition factor's
            cells.append(str(settings.weights["partition"]))
        else:
            cells.append(str(weights.get(name, "")))
    line = " ".join(_cell(c, w, r) for c, (_, w, r) in zip(cells, columns))
    return render_sprio([], version=version) + line + "\n"


def render_sprio_weights(settings: ClusterSettings, weight_tres_text: str | None = None, user_column: bool = False) -> str:
    """``sprio -w``: the header and the ``Weights`` line of sprio's short format (the same in 22.05,
    23.11 and 25.11, src/sprio/sprio.c): ``%.15i %9r`` (``%.8u`` with ``-u``) ``%.10Y %.10S``, then
    AGE, ASSOC, FAIRSHARE, JOBSIZE, PARTITION, QOS for each non-zero weight and TRES (``%.20T``) when
    PriorityWeightTRES is set.  The Weights line (print.c) has SITE 1, each weight, and TRES the
    configured string as written (``weight_tres_text``; else rebuilt from the parsed weights)."""
    if weight_tres_text is None and settings.tres_weights:
        weight_tres_text = ",".join(f"{k}={v:g}" for k, v in settings.tres_weights.items())
    cols: list[tuple[str, int, bool, str]] = [("JOBID", 15, True, "Weights"), ("PARTITION", 9, False, "")]
    if user_column:
        cols.append(("USER", 8, True, ""))
    cols += [("PRIORITY", 10, True, ""), ("SITE", 10, True, "1")]
    for factor, w in settings.weights.items():  # sprio's order: age, assoc, fairshare, jobsize, partition, qos
        name = factor.upper()
        if w:
            cols.append((name, 10, True, str(w)))
    if weight_tres_text:
        cols.append(("TRES", 20, True, weight_tres_text))
    header = " ".join(_cell(name, w, r) for name, w, r, _ in cols)
    weights = " ".join(_cell(value, w, r) for _, w, r, value in cols)
    return header + "\n" + weights + "\n"
