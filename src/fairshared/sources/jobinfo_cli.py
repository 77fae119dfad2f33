"""Read what the job-priority formulas need from a live cluster, through Slurm's CLI.

Commands (argv lists, each with the source's timeout; a failure raises
:class:`~fairshared.sources.base.SourceError` naming the command):

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

The commands run through :class:`~fairshared.sources.slurm_commands.SlurmCommands`; the
parsers of the squeue and sprio formats, shared with the daemon's push, are in
:mod:`fairshared.sources.slurm_text` (:func:`read_jobs` reads both); the others are the pure
``parse_*`` functions below.

What the CLI cannot show, and what is assumed instead (none of it arises on the test cluster):
the CPU count is squeue's (``min_cpus``) where slurmctld would take ``max_cpus`` for a job that
asked for a CPU range, or ``total_cpus`` for a requeued job; the node count is the ``node=`` of
the requested TRES (``min_nodes``); with CALCULATE_RUNNING a finished multi-partition job is
shown by squeue in the one partition it ran in while sprio keeps all of them.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field, replace

from ..inputs.sshare_dump import parse_sshare
from ..model import InputError, Job, Snapshot
from ..priority import INFINITE, ClusterInfo, PartitionInfo, PriorityInputs, parse_weight_tres
from .slurm_commands import SlurmCommands
from .slurm_text import (  # noqa: F401 - SprioFacts is still imported from here
    SPRIO_FORMAT,
    SQUEUE_ENV,
    SprioFacts,
    parse_config,
    parse_last_decay_ran,
    parse_sprio_facts,
    parse_squeue,
    parse_tres,
    priority_config,
    release_of,
    squeue_argv,
    time_str_seconds,
)

# --- scontrol show config: what slurm_text.priority_config() does not keep --------------------


def priority_config_extra(raw: dict[str, str]) -> dict:
    """Extra snapshot-config keys for the job priority, from ``scontrol show config``.

    * ``weight_tres_exact``: PriorityWeightTRES with unit suffixes applied (Mem=2G);
    * ``weight_tres_text``: PriorityWeightTRES as written (what ``sprio -w`` prints), or None;
    * ``tres_order``: AccountingStorageTRES (the order sprio lists TRES in);
    * ``state_save_location``, ``slurm_conf``: where slurmctld keeps its state / its config;
    * ``no_normal_ambiguous``: the printed flags say NO_NORMAL_ALL on a release that prints it
      for any NO_NORMAL_* flag (before 25.11: :func:`no_normal_flags`).
    """
    flags = raw.get("PriorityFlags", "")
    tres_order = [t.strip().lower() for t in raw.get("AccountingStorageTRES", "").split(",") if t.strip()]
    return {
        "weight_tres_exact": parse_weight_tres(raw.get("PriorityWeightTRES")),
        "weight_tres_text": None if raw.get("PriorityWeightTRES") in (None, "", "(null)") else raw["PriorityWeightTRES"],
        "tres_order": tres_order or None,
        "state_save_location": raw.get("StateSaveLocation"),
        "slurm_conf": raw.get("SLURM_CONF"),
        "no_normal_ambiguous": "NO_NORMAL_ALL" in flags.upper() and release_of(
            {"slurm_version": raw.get("SLURM_VERSION")}) < (25, 11),
    }


def parse_slurm_conf_flags(text: str) -> str | None:
    """The last ``PriorityFlags=`` value in slurm.conf text (comments stripped), or None."""
    value = None
    for line in text.split("\n"):
        line = line.split("#", 1)[0]
        for m in re.finditer(r"(?i)\bPriorityFlags\s*=\s*(\S*)", line):
            value = m.group(1)
    return value


# --- scontrol -o show partition / node ---------------------------------------------------------


def _kv(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)", line):
        out.setdefault(m.group(1), m.group(2))
    return out


def _minutes(text: str) -> int | None:
    """MaxTime/TimeLimit text → minutes; None for UNLIMITED/INFINITE."""
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE", ""):
        return None
    return time_str_seconds(text, default_unit="minutes") // 60


def parse_partitions(text: str, where: str = "scontrol show partition") -> dict[str, PartitionInfo]:
    """``scontrol -a -o show partition``: one PartitionInfo per line."""
    out: dict[str, PartitionInfo] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        kv = _kv(line)
        name = kv.get("PartitionName")
        if not name:
            raise InputError("has no PartitionName=", f"{where}: line {lineno}")
        try:
            pjf = int(kv.get("PriorityJobFactor", "1"))
            tier = int(kv.get("PriorityTier", "1"))
        except ValueError:
            raise InputError("has a non-numeric PriorityJobFactor/PriorityTier", f"{where}: line {lineno}") from None
        out[name] = PartitionInfo(name=name, priority_job_factor=pjf, priority_tier=tier,
                                  max_time=_minutes(kv.get("MaxTime", "UNLIMITED")),
                                  tres=parse_tres(kv.get("TRES")))
    return out


def parse_nodes(text: str, where: str = "scontrol show node") -> tuple[int, int]:
    """``scontrol -a -o show node`` → (node count, Σ effective CPUs) = node_record_count, cluster_cpus."""
    nodes = cpus = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or not line.startswith("NodeName="):
            continue
        kv = _kv(line)
        value = kv.get("CPUEfctv", kv.get("CPUTot"))
        try:
            cpus += int(value)
        except (TypeError, ValueError):
            raise InputError("has no CPUEfctv= or CPUTot=", f"{where}: line {lineno}") from None
        nodes += 1
    return nodes, cpus


def parse_qos(text: str, where: str = "sacctmgr show qos") -> dict[str, int]:
    """``sacctmgr -nP show qos format=name,priority`` → {name: priority} (empty priority = 0)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 2:
            raise InputError(f"expected name|priority, got {line!r}", f"{where}: line {lineno}")
        try:
            out[parts[0]] = int(parts[1]) if parts[1].strip() else 0
        except ValueError:
            raise InputError(f"priority {parts[1]!r} is not an integer", f"{where}: line {lineno}") from None
    return out


def parse_assoc_priorities(text: str) -> dict[tuple[str, str | None, str | None], int]:
    """``scontrol show assoc_mgr flags=assoc`` → {(account, user, partition): Priority}.

    slurmctld prints each association's effective Priority (inherited from its
    parents by slurmdbd; unset = 0, as ``_set_assoc_norm_priority`` makes it).
    """
    out: dict[tuple[str, str | None, str | None], int] = {}
    for line in text.split("\n"):
        if not line.startswith("ClusterName="):
            continue
        kv = _kv(line)
        acct = kv.get("Account")
        if not acct:
            continue
        user = re.sub(r"\(\d+\)$", "", kv.get("UserName", "")) or None
        try:
            prio = int(kv.get("Priority", "0") or 0)
        except ValueError:
            prio = 0
        out[(acct, user, kv.get("Partition") or None)] = 0 if prio == INFINITE else prio
    return out


def parse_sshare_fairshare(text: str) -> dict[tuple[str, str | None, str | None], float]:
    """FairShare of every user row of ``sshare -a -l -P [-m]`` (or ``-p``), keyed (account, user, partition)."""
    if not text.strip():
        return {}
    return parse_sshare(io.StringIO(text), "sshare -a -l -P -m").reported_fairshare


# --- reading it all ---------------------------------------------------------------------------------


def read_jobs(cmds: SlurmCommands, *, running: bool = False, skipped: list[str] | None = None) -> list[Job]:
    """The jobs (squeue) with the SiteFactor slurmctld holds for each and whether an operator set its
    priority (both from sprio: slurm_text.parse_sprio_facts; a job sprio does not list keeps
    ``site_factor`` None).  ``running``: all jobs, for CALCULATE_RUNNING (sprio then lists every job
    slurmctld still holds, finished ones included, and squeue shows a finished multi-partition job
    only in the partition it ran in).

    A job row that cannot be read leaves that job out and is noted in ``skipped`` (when given; else
    it fails the read): the other jobs still get their updates."""
    jobs = parse_squeue(cmds.run_with(squeue_argv("all" if running else "PD"), SQUEUE_ENV), skipped=skipped)
    if not jobs:
        return jobs
    bad: set[int] = set()
    facts = parse_sprio_facts(cmds.run_with(["sprio", "-h", "-o", SPRIO_FORMAT]),
                              bad_jobs=bad if skipped is not None else None, skipped=skipped)
    out = []
    for j in jobs:
        if j.job_id in bad:  # unknown whether an operator set its priority: leave it alone
            continue
        f = facts.get(j.job_id)
        out.append(replace(j, site_factor=f.site_factor if f else None, direct_set_prio=bool(f and f.direct_set_prio)))
    return out


def no_normal_flags(raw: dict[str, str], cfg: dict, slurm_conf_text: str | None) -> tuple[list[str], str | None]:
    """The PriorityFlags to use, and a warning when they are a guess.

    Through 25.05 ``priority_flags_string`` (src/common/slurm_protocol_defs.c; read in 22.05 per the
    reference notes, 23.11.11 and 24.11.7) prints ``NO_NORMAL_ALL`` when *any* NO_NORMAL_* flag is
    set; 25.11.7 and 26.05.3 print it only when all four are, each flag by name otherwise.  So on a
    release before 25.11 ``NO_NORMAL_ALL`` is ambiguous and slurm.conf (``slurm_conf_text``, None
    when unreadable) settles it; failing that all four are assumed, and the warning says so.
    """
    flags = list(cfg.get("priority_flags") or [])
    if "NO_NORMAL_ALL" not in raw.get("PriorityFlags", "").upper() or release_of(cfg) >= (25, 11):
        return flags, None
    conf = parse_slurm_conf_flags(slurm_conf_text) if slurm_conf_text is not None else None
    if conf is not None:
        return [f.strip().upper() for f in conf.split(",") if f.strip()], None
    return flags, (f"scontrol show config of Slurm {cfg.get('slurm_version') or '22.05'} prints NO_NORMAL_ALL for "
                   f"any NO_NORMAL_* flag and slurm.conf ({raw.get('SLURM_CONF') or 'path unknown'}) is unreadable: "
                   f"assuming all four (NO_NORMAL_ASSOC, NO_NORMAL_PART, NO_NORMAL_QOS, NO_NORMAL_TRES)")


def _read_text(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


@dataclass
class JobInfoCli:
    """Reads :class:`PriorityInputs` from the live cluster through ``cmds`` (its timeout, environment
    and memo).  The association tree comes from the caller (``SlurmCli.priority_inputs``)."""

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

    def jobs(self, running: bool = False, skipped: list[str] | None = None) -> list[Job]:
        return read_jobs(self.cmds, running=running, skipped=skipped)

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

    def read(self, snap: Snapshot, *, jobs: bool = True, sshare: bool = False) -> PriorityInputs:
        """Everything the job priority needs around the tree ``snap``, in one read (each command once)."""
        with self.cmds.one_read():
            return self._read(snap, jobs, sshare)

    def _read(self, snap: Snapshot, jobs: bool, sshare: bool) -> PriorityInputs:
        raw = self.raw_config()
        cfg = priority_config(raw)
        extra = priority_config_extra(raw)
        warnings: list[str] = []
        if extra["no_normal_ambiguous"]:
            cfg["priority_flags"], warning = no_normal_flags(raw, cfg, _read_text(extra["slurm_conf"]))
            warnings += [warning] if warning else []
        cfg.update(extra)
        snap = replace(snap, config=cfg, skipped_rows=list(snap.skipped_rows))
        parts = self.partitions()
        node_count, cpu_count = self.nodes()
        assoc_prio: dict = self.assoc_priorities() if cfg.get("weight_assoc") else {}
        cluster = ClusterInfo(
            partitions=parts, qos_priority=self.qos(), node_count=max(node_count, 1),
            cpu_count=max(cpu_count, 1), assoc_priority_max=max(assoc_prio.values(), default=0),
            tres_order=tuple(extra["tres_order"] or ()) or ClusterInfo().tres_order,
            slurm_version=release_of(cfg),
        )
        job_list: list[Job] = []
        if jobs:
            running = "CALCULATE_RUNNING" in {f.upper() for f in cfg.get("priority_flags") or []}
            job_list = [replace(j, assoc_priority=assoc_prio.get((j.account, j.user, (j.partitions or (None,))[0]),
                                                                 assoc_prio.get((j.account, j.user, None), 0)))
                        for j in self.jobs(running=running, skipped=snap.skipped_rows)]
        return PriorityInputs(
            snapshot=snap, cluster=cluster, jobs=job_list,
            last_calc=self.last_calc(extra["state_save_location"]),
            slurm_fairshare=self.slurm_fairshare() if sshare else None,
            warnings=warnings,
        )
