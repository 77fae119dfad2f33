"""Job records from slurmdbd through ``sacct``, for usage computed from accounting.

Every command here is an argv list run with a timeout through
:meth:`fairshared.sources.slurm_cli.SlurmCli.run` (a failure is a
:class:`~fairshared.records.SourceError` naming the command):

* ``sacct -P -n -X -a -D --noconvert -o FIELDS -S START -E END`` with
  ``SLURM_TIME_FORMAT=%s`` (epoch seconds: no time-zone or DST ambiguity in
  what we read).  With both ``-S`` and ``-E`` slurmdbd selects every job that
  was eligible before END and ended at or after START, or has not ended:
  running jobs come back in every window.  ``-D`` keeps every run of a
  requeued job (each was charged).  START/END are given as local ISO times,
  which Slurm 22.05's ``-S``/``-E`` accept (epoch numbers are refused);
* ``sacct ... -j ID,...`` re-reads jobs that were running at the last fetch and
  did not come back in the new window (slurmdbd learns of job ends
  asynchronously, so a job's end can be recorded before the high-water mark);
* ``sacctmgr -nP show qos format=name,usagefactor`` — the QOS UsageFactor;
* ``scontrol show partition -o`` — each partition's TRESBillingWeights;
* ``scontrol show config`` — StateSaveLocation and BOOT_TIME; the file
  ``StateSaveLocation/priority_last_decay_ran`` (two big-endian 64-bit times:
  the last decay iteration and the last usage reset) gives the phase of
  slurmctld's decay iterations, read only when this process may read it.

The parsers (``parse_*`` here, and the formats of :mod:`fairshared.slurm`) are pure functions.  :class:`SacctJobs` fetches
incrementally: the first call reads from the first time that still matters
(many half-lives back, or the last reset) to now, later calls only from the
high-water mark (minus a small overlap) and drop records that no longer matter.
Bad records (end before start, negative or unparseable TRES) are reported with
the job id, skipped and counted; they never fail the fetch.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..model import InputError
from ..settings import ClusterSettings
from ..slurm.config import parse_config
from ..slurm.sacctmgr import parse_qos_usage_factors
from ..slurm.scontrol import partition_billing
from ..slurm.state_files import parse_decay_state
from ..slurm.tres import parse_tres_exact
from ..usage import BadRecord, JobRecord, UsagePolicy, report_bad

SACCT_FIELDS = ["JobIDRaw", "Account", "User", "Partition", "QOS", "Start", "End", "State", "AllocTRES"]
SACCT_FORMAT = ",".join(SACCT_FIELDS)
SACCT_ENV = {"SLURM_TIME_FORMAT": "%s"}
_NOT_A_TIME = {"", "unknown", "none", "n/a", "0"}

# --- pure parsers -----------------------------------------------------------------------------

@dataclass
class SacctRows:
    """What one sacct output held."""

    records: list[JobRecord] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    running: set = field(default_factory=set)  # job ids with no end yet
    not_started: int = 0  # pending / cancelled before start: no usage


def _job_id(text: str) -> int | str:
    """JobIDRaw as an int when it is a plain (ASCII, not absurdly long) number, else the text itself."""
    t = text.strip()
    if t.isascii() and t.isdigit() and len(t) <= 20:
        return int(t)
    return t


def parse_sacct(text: str, qos_factors: dict[str, float] | None = None, where: str = "sacct") -> SacctRows:
    """``sacct -P -n -o SACCT_FORMAT`` with SLURM_TIME_FORMAT=%s → job records.

    A job that never started (Start ``Unknown``/``None``) carries no usage and is
    skipped silently; a running job has ``end=None``.  Lines with the wrong
    number of fields, unreadable times, an end before the start, or a negative
    or unparseable AllocTRES are bad records (reported with the job id).
    """
    qos_factors = qos_factors or {}
    out = SacctRows()
    n = len(SACCT_FIELDS)
    tres_cache: dict[str, dict[str, float] | str] = {}  # AllocTRES strings repeat a lot
    records, bad = out.records, out.bad
    for lineno, line in enumerate(text.split("\n"), start=1):
        parts = line.split("|")
        if len(parts) != n:
            if not line.strip():
                continue
            bad.append(BadRecord(parts[0] if parts else f"at line {lineno}",
                                 f"{where}: line {lineno} has {len(parts)} fields, expected {n}"))
            continue
        jid_s, account, user, part, qos, start_s, end_s, _state, tres_s = parts
        jid = _job_id(jid_s)
        try:
            start = float(int(start_s))
        except (ValueError, OverflowError):  # OverflowError: digits beyond a double's range
            if start_s.strip().lower() in _NOT_A_TIME:
                out.not_started += 1
                continue
            bad.append(BadRecord(jid, f"unreadable Start {start_s!r}"))
            continue
        try:
            end = float(int(end_s))
        except (ValueError, OverflowError):
            if end_s.strip().lower() not in _NOT_A_TIME:
                bad.append(BadRecord(jid, f"unreadable End {end_s!r}"))
                continue
            end = None
        if end is not None and end < start:
            bad.append(BadRecord(jid, f"ends ({end:.0f}) before it starts ({start:.0f})"))
            continue
        tres = tres_cache.get(tres_s)
        if tres is None:
            try:
                tres = parse_tres_exact(tres_s)
            except ValueError as exc:
                tres = str(exc)
            tres_cache[tres_s] = tres
        if isinstance(tres, str):
            bad.append(BadRecord(jid, tres))
            continue
        records.append(JobRecord(jid, (account, user or None, None), start, end, tres, part or None,
                                 qos_factors.get(qos, 1.0)))
        if end is None:
            out.running.add(jid)
    return out


def iso_local(t: float) -> str:
    """An epoch time as the local ``YYYY-MM-DDTHH:MM:SS`` sacct's -S/-E understand."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(math.floor(t)))


# --- incremental fetching (shared with the pyslurm source) -------------------------------------


@dataclass
class IncrementalJobs:
    """The incremental bookkeeping: records by (job id, start), the high-water mark, running jobs.

    ``overlap`` seconds before the high-water mark are read again (slurmdbd is
    told of starts and ends asynchronously).  Records that ended before
    ``not_before`` are dropped and never fetched.
    """

    overlap: float = 300.0
    hwm: float | None = None
    records: dict = field(default_factory=dict)  # (job id, start) -> JobRecord
    running: set = field(default_factory=set)
    bad: dict = field(default_factory=dict)  # job id -> BadRecord (latest)
    fetches: int = 0

    def window(self, now: float, not_before: float | None) -> tuple[float, float]:
        # first call: [not_before, now]; later: [max(hwm − overlap, not_before), now]
        lo = not_before if not_before is not None else 0.0
        if self.hwm is not None:
            lo = max(lo, self.hwm - self.overlap)
        return min(lo, now), now

    def merge(self, records: Iterable[JobRecord], bad: Iterable[BadRecord], seen_running: set,
              now: float, not_before: float | None) -> list[BadRecord]:
        """Fold one fetch in; returns the bad records not seen before (to report once)."""
        for r in records:
            self.records[(r.job_id, r.start)] = r
            self.bad.pop(r.job_id, None)
        new = []
        for b in bad:
            if self.bad.get(b.job_id) != b:
                new.append(b)
            self.bad[b.job_id] = b
        self.running = {r.job_id for r in self.records.values() if r.end is None} | seen_running
        if not_before is not None:
            self.records = {k: r for k, r in self.records.items() if r.end is None or r.end >= not_before}
        self.hwm = now
        self.fetches += 1
        return new

    def snapshot(self) -> tuple[list[JobRecord], list[BadRecord]]:
        return list(self.records.values()), list(self.bad.values())


@dataclass
class SacctJobs:
    """Job records through sacct, fetched incrementally.  ``run`` is SlurmCli.run-like (argv → stdout)."""

    run: Callable[[list[str]], str]
    overlap: float = 300.0
    chunk: int = 500  # job ids per ``sacct -j`` re-read
    # None: made from ``overlap`` (__post_init__); tests hand one in
    state: IncrementalJobs = field(default=None)  # type: ignore[assignment]
    qos_factors: dict[str, float] | None = None

    def __post_init__(self):
        if self.state is None:
            self.state = IncrementalJobs(overlap=self.overlap)

    def qos_usage_factors(self) -> dict[str, float]:
        argv = ["sacctmgr", "-nP", "show", "qos", "format=name,usagefactor"]
        return parse_qos_usage_factors(self.run(argv))

    def _sacct(self, extra: list[str]) -> str:
        return self.run(["sacct", "-P", "-n", "-X", "-a", "-D", "--noconvert", "-o", SACCT_FORMAT, *extra])

    def fetch(self, now: float | None = None,
              not_before: float | None = None) -> tuple[list[JobRecord], list[BadRecord]]:
        """Bring the records up to ``now`` and return all that still matter (and the bad ones)."""
        now = time.time() if now is None else now
        self.qos_factors = self.qos_usage_factors()
        lo, hi = self.state.window(now, not_before)
        rows = parse_sacct(self._sacct(["-S", iso_local(lo), "-E", iso_local(hi)]), self.qos_factors)
        got = {r.job_id for r in rows.records}
        missing = sorted((self.state.running - got - rows.running), key=str)
        extra_recs, extra_bad = [], []
        for i in range(0, len(missing), self.chunk):
            ids = ",".join(str(j) for j in missing[i:i + self.chunk])
            argv = ["-j", ids, "-S", iso_local(not_before or 0), "-E", iso_local(hi)]
            more = parse_sacct(self._sacct(argv),
                               self.qos_factors, "sacct -j")
            extra_recs += more.records
            extra_bad += more.bad
            rows.running |= more.running
        new_bad = self.state.merge(rows.records + extra_recs, rows.bad + extra_bad, rows.running,
                                   now, not_before)
        report_bad(new_bad, "sacct")
        return self.state.snapshot()


# --- what else the usage needs from the cluster ---------------------------------------------------


def usage_settings(run: Callable[[list[str]], str],
                   state_file_reader: Callable[[str], bytes] | None = None) -> dict:
    """What :meth:`fairshared.usage.UsagePolicy.from_settings` reads beside the settings (its ``state``).

    ``tres_billing_weights`` from ``scontrol show partition -o``; ``boot_time`` and
    the decay state (``priority_last_decay_ran``, ``priority_last_reset``) from
    ``scontrol show config`` and slurmctld's state file when it can be read.
    """
    partitions = run(["scontrol", "show", "partition", "-o"])
    out: dict = {"tres_billing_weights": partition_billing(partitions)}
    raw = parse_config(run(["scontrol", "show", "config"]))
    boot = raw.get("BOOT_TIME", "")
    try:
        out["boot_time"] = time.mktime(time.strptime(boot, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        pass
    path = os.path.join(raw.get("StateSaveLocation", ""), "priority_last_decay_ran")
    reader = state_file_reader or _read_bytes
    try:
        state = parse_decay_state(reader(path))
    except OSError:
        state = None
    if state:
        out["priority_last_decay_ran"], out["priority_last_reset"] = float(state[0]), float(state[1])
    return out


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(64)


def sacct_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for sacct: ours, with SLURM_TIME_FORMAT=%s (epoch seconds)."""
    env = dict(os.environ if base is None else base)
    env.update(SACCT_ENV)
    return env



HALF_LIVES = 20.0  # records that ended more than this many half-lives ago change usage by < 2^-20


def load_accounting(cli, settings: ClusterSettings, at: float, *, sacct: SacctJobs | None = None):
    """Policy and job records for time ``at``: (usage_settings' state, policy, records, bad records).

    ``cli`` is a :class:`~fairshared.sources.slurm_cli.SlurmCli`; pass the same
    ``sacct`` reader every time to fetch only what is new since the last call.
    """
    state = usage_settings(cli.run)
    try:
        policy = UsagePolicy.from_settings(settings, state)
    except ValueError as exc:
        raise InputError(f"cluster configuration: {exc}") from None
    if sacct is None:
        sacct = new_sacct_reader(cli)
    records, bad = sacct.fetch(now=at, not_before=policy.not_before(at, HALF_LIVES))
    return state, policy, records, bad


def new_sacct_reader(cli) -> SacctJobs:
    """An incremental sacct reader: a copy of ``cli`` (same class, timeout, Slurm binaries) with sacct's environment."""
    return SacctJobs(run=type(cli)(timeout=cli.timeout, bin_dir=cli.bin_dir, env=sacct_env(cli.env)).run)
