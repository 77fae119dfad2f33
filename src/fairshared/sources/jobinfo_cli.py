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
  flags apart, which 22.05's ``scontrol show config`` prints as ``NO_NORMAL_ALL``.

The parsers are the pure ``parse_*`` functions below.

What the CLI cannot show, and what is assumed instead (none of it arises on the test cluster):
the CPU count is squeue's (``min_cpus``) where slurmctld would take ``max_cpus`` for a job that
asked for a CPU range, or ``total_cpus`` for a requeued job; the node count is the ``node=`` of
the requested TRES (``min_nodes``); with CALCULATE_RUNNING a finished multi-partition job is
shown by squeue in the one partition it ran in while sprio keeps all of them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..model import InputError, Snapshot
from ..priority import INFINITE, ClusterInfo, JobInfo, PartitionInfo, parse_weight_tres
from .base import SourceError
from .slurm_cli import SlurmCli
from .slurm_text import (  # noqa: F401 - SprioFacts and the sprio names are still imported from here
    SPRIO_FORMAT,
    SprioFacts,
    parse_last_decay_ran,
    parse_sprio_facts,
    release_of,
    skip_or_raise,
)
from .slurm_text import parse_config, priority_config, time_str_seconds

SEP = "\x1f"  # ASCII unit separator: cannot appear in Slurm names


# --- scontrol show config: what slurm_text.priority_config() does not keep --------------------


def priority_config_extra(raw: dict[str, str]) -> dict:
    """Extra snapshot-config keys for the job priority, from ``scontrol show config``.

    * ``weight_tres_exact``: PriorityWeightTRES with unit suffixes applied (Mem=2G);
    * ``tres_order``: AccountingStorageTRES (the order sprio lists TRES in);
    * ``state_save_location``, ``slurm_conf``: where slurmctld keeps its state / its config;
    * ``no_normal_ambiguous``: the printed flags say NO_NORMAL_ALL, which 22.05 prints
      for any NO_NORMAL_* flag.
    """
    flags = raw.get("PriorityFlags", "")
    tres_order = [t.strip().lower() for t in raw.get("AccountingStorageTRES", "").split(",") if t.strip()]
    return {
        "weight_tres_exact": parse_weight_tres(raw.get("PriorityWeightTRES")),
        "tres_order": tres_order or None,
        "state_save_location": raw.get("StateSaveLocation"),
        "slurm_conf": raw.get("SLURM_CONF"),
        "no_normal_ambiguous": "NO_NORMAL_ALL" in flags.upper(),
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


_MB_POWER = {"K": -1, "M": 0, "G": 1, "T": 2, "P": 3}


def parse_tres(text: str | None) -> dict[str, int]:
    """A TRES string (``cpu=4096,mem=64G,node=1,billing=8192,gres/gpu=4``) → counts.

    Memory (``mem``, ``bb``) is in MB: scontrol prints it converted exactly
    (``CONVERT_NUM_UNIT_EXACT``), 64G = 65536.  Other suffixes are powers of 1024.
    """
    out: dict[str, int] = {}
    if not text or text in ("(null)", "N/A"):
        return out
    for item in text.split(","):
        if "=" not in item:
            continue
        name, value = item.split("=", 1)
        name = name.strip().lower()
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTP]?)", value.strip(), re.IGNORECASE)
        if not m:
            raise InputError(f"TRES {item!r} has no numeric count")
        num = float(m.group(1))
        unit = m.group(2).upper()
        if name.split("/")[0] in ("mem", "bb"):
            num *= 1024.0 ** _MB_POWER.get(unit or "M", 0)
        elif unit:
            num *= 1024.0 ** (_MB_POWER[unit] + 2)
        out[name] = round(num)
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


# --- squeue: the jobs ----------------------------------------------------------------------------

SQUEUE_FIELDS = ("JobID", "JobArrayID", "UserName", "Account", "QOS", "PriorityLong", "Nice", "State",
                 "Partition", "SubmitTime", "EligibleTime", "AccrueTime", "NumCPUs", "NumNodes",
                 "TimeLimit", "tres-alloc", "Reason")
SQUEUE_LONG = ",".join(f"{f}:0{SEP}" for f in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:0"


def _epoch(text: str) -> int:
    t = text.strip()
    if t in ("", "Unknown", "None", "N/A", "0"):
        return 0
    if t.isdigit():
        return int(t)
    raise InputError(f"time {t!r} is not Unix seconds (was SLURM_TIME_FORMAT=%s honoured?)")


def parse_squeue_jobs(text: str, where: str = "squeue", skipped: list[str] | None = None) -> list[JobInfo]:
    """``squeue -h -O SQUEUE_LONG`` (with SLURM_TIME_FORMAT=%s) → JobInfo, site/direct not yet known.
    A row that cannot be read is skipped and noted in ``skipped`` when given (slurm_text.skip_or_raise)."""
    jobs = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != len(SQUEUE_FIELDS):
            skip_or_raise(skipped, f"has {len(parts)} fields, expected {len(SQUEUE_FIELDS)}", f"{where}: line {lineno}")
            continue
        d = dict(zip(SQUEUE_FIELDS, (p.strip() for p in parts)))
        w = f"{where}: line {lineno} (job {d['JobID']})"
        try:
            tl = d["TimeLimit"].upper()
            if tl in ("UNLIMITED", "INFINITE"):
                limit: int | None = INFINITE
            elif tl in ("NOT_SET", "PARTITION_LIMIT", "N/A", ""):
                limit = None
            else:
                limit = time_str_seconds(d["TimeLimit"], default_unit="minutes") // 60
            tres = parse_tres(d["tres-alloc"])
            job = JobInfo(
                job_id=int(d["JobID"]),
                display_id=d["JobArrayID"],
                user=d["UserName"],
                account=d["Account"],
                qos=d["QOS"],
                priority=int(d["PriorityLong"]),
                nice=int(d["Nice"]),
                state=d["State"],
                partitions=tuple(p for p in d["Partition"].split(",") if p),
                submit_time=_epoch(d["SubmitTime"]),
                eligible_time=_epoch(d["EligibleTime"]),
                accrue_time=_epoch(d["AccrueTime"]),
                cpus=int(d["NumCPUs"]),
                min_nodes=int(tres.get("node") or d["NumNodes"] or 1),
                time_limit=limit,
                tres=tres,
                reason=d["Reason"],
            )
        except (ValueError, InputError) as exc:
            skip_or_raise(skipped, f"cannot read the job: {exc}", w)
            continue
        jobs.append(job)
    return jobs


def parse_sshare_fairshare(text: str) -> dict[tuple[str, str | None, str | None], float]:
    """FairShare of every user row of ``sshare -a -l -P [-m]`` (or ``-p``), keyed (account, user, partition)."""
    import io

    from ..inputs.sshare_dump import parse_sshare

    if not text.strip():
        return {}
    return parse_sshare(io.StringIO(text), "sshare -a -l -P -m").reported_fairshare


# --- reading it all ---------------------------------------------------------------------------------


@dataclass
class PriorityInputs:
    """Everything ``sprio``/``explain``/``compare`` need: the tree (a Snapshot), the cluster, the jobs.

    ``last_calc`` is slurmctld's last priority recalculation (None if unknown);
    ``slurm_fairshare`` sshare's FairShare per user association, when read.
    """

    snapshot: Snapshot
    cluster: ClusterInfo
    jobs: list[JobInfo]
    last_calc: int | None = None
    slurm_fairshare: dict | None = None
    warnings: list[str] = field(default_factory=list)
    evaluated_at: float | None = None  # for snapshots: the time they were evaluated at


@dataclass
class JobInfoCli:
    """Reads :class:`PriorityInputs` from the live cluster with a :class:`SlurmCli` (same timeout/env)."""

    cli: SlurmCli = field(default_factory=SlurmCli)

    def _run(self, argv: list[str], env_extra: dict[str, str] | None = None) -> str:
        """SlurmCli.run, naming the whole command (not just its first three words) when it fails."""
        old = self.cli.env
        if env_extra:
            base = dict(old) if old is not None else dict(os.environ)
            self.cli.env = {**base, **env_extra}
        try:
            return self.cli.run(argv)
        except SourceError as exc:
            short, full = " ".join(argv[:3]), " ".join(a if len(a) <= 40 else "…" for a in argv)
            raise SourceError(str(exc).replace(f"`{short}`", f"`{full}`", 1)) from None
        finally:
            self.cli.env = old

    def raw_config(self) -> dict[str, str]:
        return parse_config(self._run(["scontrol", "show", "config"]))

    def partitions(self) -> dict[str, PartitionInfo]:
        return parse_partitions(self._run(["scontrol", "-a", "-o", "show", "partition"]))

    def nodes(self) -> tuple[int, int]:
        return parse_nodes(self._run(["scontrol", "-a", "-o", "show", "node"]))

    def qos(self) -> dict[str, int]:
        return parse_qos(self._run(["sacctmgr", "-nP", "show", "qos", "format=name,priority"]))

    def assoc_priorities(self) -> dict:
        return parse_assoc_priorities(self._run(["scontrol", "show", "assoc_mgr", "flags=assoc"]))

    def jobs(self, running: bool = False, skipped: list[str] | None = None) -> list[JobInfo]:
        # CALCULATE_RUNNING: sprio lists every job slurmctld still holds, finished ones included
        # (for MinJobAge); squeue then shows only the partition a multi-partition job ran in.
        states = "all" if running else "PD"
        return parse_squeue_jobs(self._run(["squeue", "-h", "-a", "-t", states, "-O", SQUEUE_LONG],
                                           {"SLURM_TIME_FORMAT": "%s"}), skipped=skipped)

    def sprio_facts(self, bad_jobs: set[int] | None = None, skipped: list[str] | None = None
                    ) -> dict[int, SprioFacts]:
        return parse_sprio_facts(self._run(["sprio", "-h", "-o", SPRIO_FORMAT]), bad_jobs=bad_jobs, skipped=skipped)

    def slurm_fairshare(self) -> dict:
        return parse_sshare_fairshare(self._run(["sshare", "-a", "-l", "-P", "-m"]))

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

    def read(self, *, jobs: bool = True, sshare: bool = False) -> PriorityInputs:
        """Everything the job priority needs, in one read: each command runs once (SlurmCli.one_read)."""
        with self.cli.one_read():
            return self._read(jobs, sshare)

    def _read(self, jobs: bool, sshare: bool) -> PriorityInputs:
        from dataclasses import replace

        raw = self.raw_config()
        cfg = priority_config(raw)
        extra = priority_config_extra(raw)
        warnings: list[str] = []
        if extra["no_normal_ambiguous"]:
            flags = None
            try:
                if extra["slurm_conf"]:
                    with open(extra["slurm_conf"], encoding="utf-8", errors="replace") as fh:
                        flags = parse_slurm_conf_flags(fh.read())
            except OSError:
                pass
            if flags is not None:
                cfg["priority_flags"] = [f.strip().upper() for f in flags.split(",") if f.strip()]
            else:
                warnings.append("scontrol prints NO_NORMAL_ALL for any NO_NORMAL_* flag and slurm.conf is "
                                "unreadable: assuming all four")
        cfg.update(extra)
        snap = self.cli.snapshot(jobs=False)
        snap.config = cfg
        parts = self.partitions()
        node_count, cpu_count = self.nodes()
        qos = self.qos()
        assoc_prio: dict = {}
        if cfg.get("weight_assoc"):
            assoc_prio = self.assoc_priorities()
        cluster = ClusterInfo(
            partitions=parts, qos_priority=qos, node_count=max(node_count, 1), cpu_count=max(cpu_count, 1),
            assoc_priority_max=max(assoc_prio.values(), default=0),
            tres_order=tuple(extra["tres_order"] or ()) or ClusterInfo().tres_order,
            slurm_version=release_of(cfg),
        )
        job_list: list[JobInfo] = []
        if jobs:
            running = "CALCULATE_RUNNING" in {f.upper() for f in cfg.get("priority_flags") or []}
            job_list = self.jobs(running=running, skipped=snap.skipped_rows)
            if job_list:
                bad: set[int] = set()
                facts = self.sprio_facts(bad, snap.skipped_rows)
                out = []
                for j in job_list:
                    if j.job_id in bad:  # unknown whether an operator set its priority: leave it alone
                        continue
                    fact = facts.get(j.job_id)
                    ap = assoc_prio.get((j.account, j.user, j.partitions[0] if j.partitions else None),
                                        assoc_prio.get((j.account, j.user, None), 0))
                    out.append(replace(j, site_factor=fact.site_factor if fact else 0,
                                       direct_set_prio=bool(fact and fact.direct_set_prio),
                                       assoc_priority=ap))
                job_list = out
        return PriorityInputs(
            snapshot=snap, cluster=cluster, jobs=job_list,
            last_calc=self.last_calc(extra["state_save_location"]),
            slurm_fairshare=self.slurm_fairshare() if sshare else None,
            warnings=warnings,
        )

