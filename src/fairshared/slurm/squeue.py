"""``squeue -h -a -t STATES -O SQUEUE_LONG``: the jobs, one line each.  Pure.

One format for every reader: the daemon's push, sprio/explain/compare and push mode priority.
Fields separated by an ASCII unit separator, which no Slurm name can hold, so that no
user-chosen text (job names, comments, paths: none is printed) can shift a field; times as
Unix seconds (SQUEUE_ENV).  What the fields carry, release by release (src/squeue/print.c,
slurmctld's pack_job in job_mgr.c):

* JobID (``%A``, _print_job_job_id2) prints ``step_id.job_id`` as ``%u`` in every release up to
  26.05.3, an array task's own id included.  SLUIDs (25.11+, src/common/sluid.h: a 64-bit
  "Slurm Lexicographically-sortable Unique ID", printed as 14 Crockford base32 characters after
  a leading ``s``) have their own fields: squeue ``-O SLUID`` (``%s``), sprio ``%s``, sacct
  ``SLUID``, and ``SLUID=`` in ``scontrol show job`` (details only).  None of the formats here
  asks for one, and JobID/JobArrayID/sprio ``%i`` stay numeric, so no SLUID can reach these
  parsers; one would fail the job-id check and be skipped like any unreadable row.
* JobArrayID (``%i``): ``123_4``, ``123_[5-9]`` (pending tasks not yet split), ``7+1`` (het job).
* QOS (``%q``): for a pending job its request as given (``details->qos_req``), so from 24.11 a
  job submitted with ``--qos=hi,lo`` shows ``hi,lo``; otherwise the one QOS it runs in.
* PriorityLong (``%Q``): ``job->priority``, one number however many partitions and QOS the job
  competes in (the per-partition × QOS values go only to ``squeue -P`` and sprio).
* Partition (``%P``): ``high,debug`` for a job pending in several, the one it runs in otherwise.
"""

from __future__ import annotations

from ..model import InputError, Job
from .tres import parse_tres
from .units import epoch_seconds, time_limit_minutes

SEP = "\x1f"  # ASCII unit separator: cannot appear in Slurm names
SQUEUE_FIELDS = ("JobID", "JobArrayID", "UserName", "Account", "QOS", "PriorityLong", "Nice", "State",
                 "Partition", "SubmitTime", "EligibleTime", "AccrueTime", "NumCPUs", "NumNodes",
                 "TimeLimit", "tres-alloc", "Reason")
SQUEUE_LONG = ",".join(f"{f}:0{SEP}" for f in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:0"
SQUEUE_ENV = {"SLURM_TIME_FORMAT": "%s"}


def squeue_argv(states: str = "PD") -> list[str]:
    """The one squeue command line: jobs in ``states`` (``PD``; ``all`` with CALCULATE_RUNNING),
    hidden partitions included (``-a``: slurmctld computes priorities for those too)."""
    return ["squeue", "-h", "-a", "-t", states, "-O", SQUEUE_LONG]


def skip_or_raise(skipped: list[str] | None, what: str, where: str) -> None:
    """A job row that cannot be read: noted in ``skipped`` (the rest of the read goes on), or,
    when the caller keeps no such list, an :class:`InputError`."""
    if skipped is None:
        raise InputError(what, where)
    skipped.append(f"{where}: {what}")


def parse_squeue(text: str, where: str = "squeue", skipped: list[str] | None = None) -> list[Job]:
    """``squeue_argv()`` with SQUEUE_ENV → one :class:`~fairshared.model.Job` per line, SiteFactor and
    operator-set priority not yet known (sprio tells them: :func:`squeue_rows` for a reader that
    builds each Job once with them).  Lines end at ``\n`` only: a job name may hold any other line
    break.  A row that cannot be read is skipped and noted in ``skipped`` when given
    (:func:`skip_or_raise`)."""
    return [Job(**row) for row in squeue_rows(text, where, skipped)]


def squeue_rows(text: str, where: str = "squeue", skipped: list[str] | None = None) -> list[dict]:
    """What :func:`parse_squeue` reads, each job as the keyword arguments of its
    :class:`~fairshared.model.Job` (all but ``site_factor``, ``direct_set_prio`` and ``assoc_priority``)."""
    rows = []
    n_fields = len(SQUEUE_FIELDS)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != n_fields:
            skip_or_raise(skipped, f"has {len(parts)} fields, expected {n_fields}", f"{where}: line {lineno}")
            continue
        (job_id, array_id, user, account, qos, priority, nice, state, partition, submit, eligible, accrue,
         cpus, nodes, time_limit, tres_text, reason) = [p.strip() for p in parts]  # SQUEUE_FIELDS
        try:  # in this order: the first error is the one reported
            tres = parse_tres(tres_text)
            rows.append({
                "job_id": int(job_id), "display_id": array_id, "user": user, "account": account,
                "partition": partition, "qos": qos, "priority": int(priority), "nice": int(nice),
                "state": state, "submit_time": epoch_seconds(submit),
                "eligible_time": epoch_seconds(eligible), "accrue_time": epoch_seconds(accrue),
                "cpus": int(cpus), "min_nodes": int(tres.get("node") or nodes or 1),
                "time_limit": time_limit_minutes(time_limit), "tres": tres, "reason": reason})
        except (ValueError, InputError) as exc:
            skip_or_raise(skipped, f"cannot read the job: {exc}", f"{where}: line {lineno} (job {job_id})")
    return rows


