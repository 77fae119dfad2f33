"""Read what the job-priority formulas need from a live cluster, through Slurm's CLI.

Commands (argv lists, each with the source's timeout; a failure raises
:class:`~fairshared.records.SourceError` naming the command):

* ``scontrol show config``                 — weights, flags, PriorityMaxAge, TRES order,
  StateSaveLocation (``SLURM_TIME_FORMAT`` does not matter here);
* ``scontrol -a -o show partition``        — PriorityJobFactor, PriorityTier, MaxTime and the
  TRES totals of every partition, hidden ones included (Slurm normalises over all);
* ``scontrol -a -o show node``             — node count and CPUs (CPUEfctv, else CPUTot);
* ``sacctmgr -nP show qos format=name,priority`` — every QOS priority;
* ``squeue -h -a -t PD -O ...``            — the pending jobs (all jobs with CALCULATE_RUNNING),
  fields separated by an ASCII unit separator so that no user-chosen text (job
  names, comments, paths: none is printed) can shift a field; times as Unix
  seconds (``SLURM_TIME_FORMAT=%s``);
* ``sprio -h -o ...``                      — what slurmctld does not print anywhere else in 22.05:
  each job's SiteFactor, and whether an operator fixed its priority (sprio then shows
  all factors 0 with SITE and NICE 0, or SITE −2^31 for a job in several partitions);
* ``scontrol show assoc_mgr flags=assoc``   — association Priority values, only when
  PriorityWeightAssoc is not 0;
* ``sshare -a -l -P -m``                    — sshare's own FairShare column (``compare``'s "Slurm's order");
* the file ``StateSaveLocation/priority_last_decay_ran`` — when slurmctld last recomputed
  every job's priority (two big-endian int64: last run, last reset).  sprio shows the
  factors of that moment, so ``fairshared sprio`` evaluates age at that time when it can
  read the file (root or SlurmUser).
* slurm.conf (its path from ``scontrol show config``) — only to tell the NO_NORMAL_*
  flags apart, which ``scontrol show config`` before 25.11 prints as ``NO_NORMAL_ALL``.

The commands run through :class:`~fairshared.sources.slurm_commands.SlurmCommands`; what they
print is parsed by the pure ``parse_*`` functions of :mod:`fairshared.slurm`, the one package that
knows Slurm's text formats (:func:`read_jobs` reads squeue and sprio).

What the CLI cannot show, and what is assumed instead (none of it arises on the test cluster):
the CPU count is squeue's (``min_cpus``) where slurmctld would take ``max_cpus`` for a job that
asked for a CPU range, or ``total_cpus`` for a requeued job; the node count is the ``node=`` of
the requested TRES (``min_nodes``); with CALCULATE_RUNNING a finished multi-partition job is
shown by squeue in the one partition it ran in while sprio keeps all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..model import ClusterInfo, Job, PartitionInfo, Snapshot
from ..slurm.assoc_mgr import parse_assoc_priorities
from ..settings import ClusterSettings
from ..slurm.config import parse_config, parse_slurm_conf_flags, priority_config_extra
from ..slurm.sacctmgr import parse_qos
from ..slurm.scontrol import parse_nodes, parse_partitions
from ..slurm.sprio import SPRIO_FORMAT, parse_sprio_facts
from ..slurm.squeue import SQUEUE_ENV, squeue_argv, squeue_rows
from ..slurm.sshare import parse_sshare_fairshare
from ..slurm.state_files import parse_last_decay_ran
from ..slurm.versions import NO_NORMAL_NAMED, release_of
from .slurm_commands import SlurmCommands


def read_jobs(cmds: SlurmCommands, *, running: bool = False, skipped: list[str] | None = None,
              assoc_priority: Mapping[tuple, int] | None = None) -> list[Job]:
    """The jobs (squeue) with the SiteFactor slurmctld holds for each and whether an operator set its
    priority (both from sprio: :func:`fairshared.slurm.sprio.parse_sprio_facts`; a job sprio does not
    list keeps ``site_factor`` None).  ``running``: all jobs, for CALCULATE_RUNNING (sprio then lists
    every job slurmctld still holds, finished ones included, and squeue shows a finished
    multi-partition job only in the partition it ran in).  ``assoc_priority``: the Priority of each association
    (:func:`fairshared.slurm.assoc_mgr.parse_assoc_priorities`), for the job's association (its first
    partition's, else the one without partition, else 0).

    A job row that cannot be read leaves that job out and is noted in ``skipped`` (when given; else
    it fails the read): the other jobs still get their updates.  sprio runs only when squeue shows a
    job, and each Job is built once, with what sprio says of it."""
    rows = squeue_rows(cmds.run_with(squeue_argv("all" if running else "PD"), SQUEUE_ENV), skipped=skipped)
    if not rows:
        return []
    bad: set[int] = set()
    facts = parse_sprio_facts(cmds.run_with(["sprio", "-h", "-o", SPRIO_FORMAT]),
                              bad_jobs=bad if skipped is not None else None, skipped=skipped)
    out = []
    for row in rows:
        if row["job_id"] in bad:  # unknown whether an operator set its priority: leave it alone
            continue
        f = facts.get(row["job_id"])
        if assoc_priority:
            key = (row["account"], row["user"])
            part = next((p for p in row["partition"].split(",") if p), None)
            row["assoc_priority"] = assoc_priority.get((*key, part), assoc_priority.get((*key, None), 0))
        out.append(Job(**row, site_factor=f.site_factor if f else None,
                       direct_set_prio=bool(f and f.direct_set_prio)))
    return out


def no_normal_flags(raw: dict[str, str], settings: ClusterSettings,
                    slurm_conf_text: str | None) -> tuple[list[str], str | None]:
    """The PriorityFlags to use, and a warning when they are a guess.

    Through 25.05 ``priority_flags_string`` (src/common/slurm_protocol_defs.c; read in 22.05 per the
    reference notes, 23.11.11 and 24.11.7) prints ``NO_NORMAL_ALL`` when *any* NO_NORMAL_* flag is
    set; 25.11.7 and 26.05.3 print it only when all four are, each flag by name otherwise.  So on a
    release before 25.11 ``NO_NORMAL_ALL`` is ambiguous and slurm.conf (``slurm_conf_text``, None
    when unreadable) settles it; failing that all four are assumed, and the warning says so.
    """
    flags = list(settings.priority_flags)
    if ("NO_NORMAL_ALL" not in raw.get("PriorityFlags", "").upper()
            or release_of(settings.slurm_version) >= NO_NORMAL_NAMED):
        return flags, None
    conf = parse_slurm_conf_flags(slurm_conf_text) if slurm_conf_text is not None else None
    if conf is not None:
        return [f.strip().upper() for f in conf.split(",") if f.strip()], None
    return flags, (f"scontrol show config of Slurm {settings.slurm_version or '22.05'} prints "
                   f"NO_NORMAL_ALL for any NO_NORMAL_* flag and slurm.conf "
                   f"({raw.get('SLURM_CONF') or 'path unknown'}) is unreadable: assuming all four "
                   f"(NO_NORMAL_ASSOC, NO_NORMAL_PART, NO_NORMAL_QOS, NO_NORMAL_TRES)")


def read_slurm_conf(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


@dataclass
class JobInfoCli:
    """Reads the job details (:attr:`Snapshot.cluster_info`, each job's priority factors' inputs) from
    the live cluster through ``cmds`` (its timeout, environment and memo).  The association tree comes
    from the caller (``SlurmCli.snapshot(details=True)``)."""

    cmds: SlurmCommands = field(default_factory=SlurmCommands)

    def raw_config(self) -> dict[str, str]:
        return parse_config(self.cmds.run_with(["scontrol", "show", "config"]))

    def partitions(self) -> dict[str, PartitionInfo]:
        return parse_partitions(self.cmds.run_with(["scontrol", "-a", "-o", "show", "partition"]))

    def nodes(self) -> tuple[int, int]:
        return parse_nodes(self.cmds.run_with(["scontrol", "-a", "-o", "show", "node"]))

    def qos(self) -> dict[str, int]:
        return parse_qos(self.cmds.run_with(["sacctmgr", "-nP", "show", "qos", "format=name,priority"]))

    def assoc_priorities(self) -> dict:
        return parse_assoc_priorities(self.cmds.run_with(["scontrol", "show", "assoc_mgr", "flags=assoc"]))

    def jobs(self, running: bool = False, skipped: list[str] | None = None,
             assoc_priority: Mapping[tuple, int] | None = None) -> list[Job]:
        return read_jobs(self.cmds, running=running, skipped=skipped, assoc_priority=assoc_priority)

    def slurm_fairshare(self) -> dict:
        return parse_sshare_fairshare(self.cmds.run_with(["sshare", "-a", "-l", "-P", "-m"]))

    @staticmethod
    def last_calc(state_save_location: str | None) -> int | None:
        """slurmctld's last priority recalculation, or None when the state file cannot be read."""
        if not state_save_location:
            return None
        try:
            with open(os.path.join(state_save_location, "priority_last_decay_ran"), "rb") as fh:
                return parse_last_decay_ran(fh.read(16))
        except OSError:
            return None

    def read(self, snap: Snapshot, *, jobs: bool = True, sshare: bool = False) -> Snapshot:
        """``snap`` with everything the job priority needs around its tree, in one read (each command
        once): the cluster info, the jobs (``jobs``), slurmctld's last calculation, sshare's FairShare
        column (``sshare``) and the warnings."""
        with self.cmds.one_read():
            return self._read(snap, jobs, sshare)

    def _read(self, snap: Snapshot, jobs: bool, sshare: bool) -> Snapshot:
        raw = self.raw_config()  # the read's memo: the scontrol show config snap's settings came from
        extra = priority_config_extra(raw)
        settings = snap.settings
        warnings: list[str] = []
        # the pull (SlurmCli._snapshot) has already told them apart from slurm.conf when it could:
        # read it again only for the warning when the flags still say NO_NORMAL_ALL
        if extra["no_normal_ambiguous"] and "NO_NORMAL_ALL" in settings.printed_flags:
            flags, warning = no_normal_flags(raw, settings, read_slurm_conf(extra["slurm_conf"]))
            settings = settings.with_values(priority_flags=flags)
            warnings += [warning] if warning else []
        settings = settings.with_values(**extra)
        snap = replace(snap, settings=settings, skipped_rows=list(snap.skipped_rows))
        parts = self.partitions()
        node_count, cpu_count = self.nodes()
        assoc_prio: dict = self.assoc_priorities() if settings.weight_assoc else {}
        cluster = ClusterInfo(
            partitions=parts, qos_priority=self.qos(), node_count=max(node_count, 1),
            cpu_count=max(cpu_count, 1), assoc_priority_max=max(assoc_prio.values(), default=0),
            tres_order=tuple(extra["tres_order"] or ()) or ClusterInfo().tres_order,
            slurm_version=release_of(settings.slurm_version),
        )
        job_list: list[Job] = []
        if jobs:
            running = "CALCULATE_RUNNING" in settings.flags
            job_list = self.jobs(running=running, skipped=snap.skipped_rows, assoc_priority=assoc_prio)
        return replace(
            snap, cluster_info=cluster, jobs=job_list,
            last_calc=self.last_calc(extra["state_save_location"]),
            reported_fairshare=self.slurm_fairshare() if sshare else None,
            warnings=[*snap.warnings, *warnings],
        )
