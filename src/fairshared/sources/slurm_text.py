"""Parsers for the text Slurm's command-line tools print.  Pure functions, no I/O.

Each parser takes the command's standard output and returns plain data; the
command lines themselves live in :mod:`fairshared.sources.slurm_cli` (tree, usage,
jobs for the push) and :mod:`fairshared.sources.jobinfo_cli` (what job priority
needs).  Every Slurm text format fairshared reads is parsed here, except sshare's,
which :mod:`fairshared.inputs.sshare_dump` parses (a dump is also an input file).  Nothing
here relies on row order, on the classic FairShare column of account rows, or on
the ``--json`` options that appeared in 23.11: those changed between 22.05 and
26.05.
"""

from __future__ import annotations

import functools
import io
import math
import re
import struct
from dataclasses import dataclass

from ..inputs.sshare_dump import parse_sshare
from ..model import PARENT, Controllers, InputError, Job, check_shares, check_usage
from ..priority import INFINITE, NICE_OFFSET, PartitionInfo, parse_weight_tres

# --- scontrol show config ---------------------------------------------------------------------


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = Value`` lines into a dict (first occurrence wins); indexed
    keys keep their index (``SlurmctldHost[1]``)."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z_][\w/]*(?:\[\d+\])?)\s*=\s?(.*)$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2).strip()
    return out


def time_str_seconds(text: str, *, default_unit: str = "minutes") -> int:
    """A Slurm time string in seconds: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``.

    A bare number is ``default_unit`` (slurm.conf's half-life and calc period are minutes).
    ``scontrol show config`` prints ``00:30:00`` or ``7-00:00:00``.
    """
    s = text.strip()
    if not s or s.upper() in ("NONE", "(NULL)"):
        return 0
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        days = int(d)
        parts = [int(p) for p in s.split(":")] if s else [0]
        while len(parts) < 3:
            parts.append(0)  # D-HH, D-HH:MM
        h, m, sec = parts[:3]
        return ((days * 24 + h) * 60 + m) * 60 + sec
    parts = [int(p) for p in s.split(":")]
    if len(parts) == 1:
        return parts[0] * (60 if default_unit == "minutes" else 1)
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    h, m, sec = parts[:3]
    return (h * 60 + m) * 60 + sec


def _int(v: str, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def priority_config(raw: dict[str, str]) -> dict:
    """The priority settings fairshared needs, with Slurm's defaults, in base units.

    Keys: cluster_name, slurm_version, priority_type, priority_flags (list),
    dampening, half_life_seconds, calc_period_seconds, usage_reset_period,
    max_age_seconds, favor_small, weight_{age,assoc,fairshare,jobsize,partition,qos},
    weight_tres (dict), accounting_storage_enforce (list), site_factor_plugin.
    """
    flags = [f.strip().upper() for f in raw.get("PriorityFlags", "").split(",") if f.strip()]
    tres = {}
    for item in raw.get("PriorityWeightTRES", "").split(","):
        if "=" in item and item.strip() != "(null)":
            k, v = item.split("=", 1)
            try:
                tres[k.strip().lower()] = float(v)
            except ValueError:
                pass
    enforce = [e.strip().lower() for e in raw.get("AccountingStorageEnforce", "").split(",") if e.strip()]
    plugin = raw.get("PrioritySiteFactorPlugin", "(null)")
    return {
        "cluster_name": raw.get("ClusterName"),
        "slurm_version": raw.get("SLURM_VERSION"),
        "priority_type": raw.get("PriorityType", "priority/basic"),
        "priority_flags": flags,
        "dampening": _int(raw.get("FairShareDampeningFactor", "1"), 1),
        "half_life_seconds": time_str_seconds(raw.get("PriorityDecayHalfLife", "7-00:00:00")),
        "calc_period_seconds": time_str_seconds(raw.get("PriorityCalcPeriod", "00:05:00")),
        "usage_reset_period": raw.get("PriorityUsageResetPeriod", "NONE").upper(),
        "max_age_seconds": time_str_seconds(raw.get("PriorityMaxAge", "7-00:00:00")),
        "favor_small": raw.get("PriorityFavorSmall", "No").lower() in ("yes", "1", "true"),
        "weight_age": _int(raw.get("PriorityWeightAge")),
        "weight_assoc": _int(raw.get("PriorityWeightAssoc")),
        "weight_fairshare": _int(raw.get("PriorityWeightFairShare")),
        "weight_jobsize": _int(raw.get("PriorityWeightJobSize")),
        "weight_partition": _int(raw.get("PriorityWeightPartition")),
        "weight_qos": _int(raw.get("PriorityWeightQOS")),
        "weight_tres": tres,
        "accounting_storage_enforce": enforce,
        "site_factor_plugin": None if plugin in ("(null)", "") else plugin,
        "rate_limit": rate_limit(raw.get("SlurmctldParameters"), raw.get("SLURM_VERSION")),
        "slurm_user_uid": _uid_of(raw.get("SlurmUser", "")),
    }


def rate_limit(params: str | None, version: str | None = None) -> dict | None:
    """slurmctld's RPC rate limiting from ``SlurmctldParameters``, None when off or when ``version``
    (SLURM_VERSION) is older than 23.02, which brought rate_limit.c: 22.05 accepts ``rl_enable``
    in SlurmctldParameters and ignores it (checked live: no RPC of a burst is refused).

    With ``rl_enable`` (matched as slurmctld does, a case-insensitive substring: rate_limit.c
    ``rate_limit_init``) each user but SlurmUser and root has a token bucket of ``rl_bucket_size``
    RPCs (default 30) refilled by ``rl_refill_rate`` tokens (2) every ``rl_refill_period`` seconds
    (1); an RPC past it is answered "Rate limit exceeded", and Slurm's client library then sleeps
    1, 2, 3 … s and retries without end (slurm_protocol_api.c, SLURMCTLD_COMMUNICATIONS_BACKOFF).
    Keys: bucket_size, refill_rate, refill_period (23.02 to 26.05)."""
    text = (params or "").lower()
    if "rl_enable" not in text or (version and (0, 0) < version_tuple(version) < (23, 2)):
        return None
    out = {"bucket_size": 30, "refill_rate": 2, "refill_period": 1}
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        name = key.removeprefix("rl_")
        if name in out and value.strip().isdigit() and int(value) > 0:
            out[name] = int(value)
    return out


def _uid_of(text: str) -> int | None:
    """``SlurmUser = slurm(64030)`` → 64030."""
    m = re.fullmatch(r".*\((\d+)\)", text.strip())
    return int(m.group(1)) if m else None


def controllers(raw: dict[str, str]) -> Controllers:
    """The slurmctld hosts of ``scontrol show config``: ``SlurmctldHost[i] = name(addr)`` (the address
    is the name when none is given), ``SlurmctldPort = 6817`` or a range ``6817-6818`` (the first
    port), ``StateSaveLocation``, ``SlurmctldTimeout = 120 sec``."""
    hosts = []
    i = 0
    while f"SlurmctldHost[{i}]" in raw:
        text = raw[f"SlurmctldHost[{i}]"].strip()
        m = re.fullmatch(r"([^()\s]+)(?:\(([^()\s]+)\))?", text)
        if not m:
            raise InputError(f"SlurmctldHost[{i}] = {text!r} is not NAME or NAME(ADDRESS)",
                             "scontrol show config")
        hosts.append((m.group(1), m.group(2) or m.group(1)))
        i += 1
    port = re.match(r"\s*(\d+)", raw.get("SlurmctldPort", ""))
    timeout = re.match(r"\s*(\d+)", raw.get("SlurmctldTimeout", ""))
    state = raw.get("StateSaveLocation", "").strip()
    return Controllers(hosts=tuple(hosts), port=int(port.group(1)) if port else 6817,
                       state_save_location=state if state and state != "(null)" else None,
                       timeout=int(timeout.group(1)) if timeout else 120,
                       release=version_tuple(raw.get("SLURM_VERSION")))


def parse_heartbeat(data: bytes) -> tuple[int, int] | None:
    """``StateSaveLocation/heartbeat``, written by the controller in control every
    min(SlurmctldTimeout/4, 30) s when a backup is configured: the Unix time and the writer's
    SlurmctldHost index, two big-endian uint64 (slurmctld/heartbeat.c, 22.05 to 26.05).  None when
    the file is shorter (being rewritten: it is replaced by a link, so rarely)."""
    if len(data) < 16:
        return None
    written, index = struct.unpack(">QQ", data[:16])
    return written, index


def version_tuple(version: str | None) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def release_of(config: dict) -> tuple[int, int]:
    """The (major, minor) release a snapshot's config names; 22.05's when it names none."""
    version = version_tuple(config.get("slurm_version"))
    return version if version != (0, 0) else (22, 5)


# --- scontrol show assoc_mgr flags=assoc ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssocRecord:
    """One association as slurmctld's association manager holds it."""

    id: int
    account: str
    user: str | None
    partition: str | None
    parent_id: int | None
    shares: int | str
    usage: float
    order: int | str | None


def _name_uid(value: str) -> tuple[str, int] | None:
    r"""``name(uid)`` → (name, uid), else None: the regex ``^(.*)\((\d+)\)$`` on a word (no line
    break), without one (``\d`` and :meth:`str.isdecimal` are the same characters)."""
    if value.endswith(")"):
        i = value.rfind("(")
        if i >= 0 and value[i + 1:-1].isdecimal():
            return value[:i], int(value[i + 1:-1])
    return None


# A record: its ``ClusterName=`` line and the indented lines after it.  A line that is not indented
# (a heading such as "QOS Records", an empty line) ends it; split on the newline before each such line.
_RECORDS = re.compile(r"\n(?![ \t])")
# the keys a record is read from: as slurmctld prints a record, all of them are in its first
# _HEAD_WORDS words (ClusterName Account UserName Partition Priority ID, SharesRaw/..., UsageRaw/...,
# ParentAccount Lft|Lineage DefAssoc)
_ASSOC_KEYS = frozenset(("ID", "Account", "UserName", "Partition", "SharesRaw/Norm/Level/Factor",
                         "UsageRaw/Norm/Efctv", "ParentAccount", "Lineage", "Lft"))
_HEAD_WORDS = 11


def _words(words: list[str]) -> dict[str, str]:
    r"""``KEY=VALUE`` words → {KEY: VALUE}, the first occurrence of a key kept.

    The key is the word up to its first ``=`` after the first character and the value the rest of
    the word: what ``re.finditer(r"(\S+?)=(\S*)", line)`` finds, word by word (a match cannot start
    inside a word whose first character is not followed by a ``=``, nor span whitespace, which
    :meth:`str.split` and ``\s`` define alike).  So ``a==b`` is a → ``=b``, ``=x=y`` is ``=x`` → y,
    ``k=`` is k → "", and ``=x`` or a word without ``=`` is nothing."""
    # reversed: in a dict display the last occurrence wins
    out = {k: v for k, eq, v in [w.partition("=") for w in reversed(words)] if eq}
    if "" in out:  # a word starting with "=": its key runs to the next "=" (rare; done word by word)
        out = {}
        for w in words:
            i = w.find("=", 1)
            if i > 0 and w[:i] not in out:
                out[w[:i]] = w[i + 1:]
    return out


def _record_fields(record: str) -> dict[str, str]:
    """The ``KEY=VALUE`` words of one record (:func:`_words`).  Only the keys of _ASSOC_KEYS are read,
    so its first _HEAD_WORDS words are enough, unless one of those keys is missing there and the rest
    holds ``KEY=`` somewhere (as a word whose key is KEY must): then all its words are read."""
    words = record.split(None, _HEAD_WORDS)
    if len(words) <= _HEAD_WORDS:
        return _words(words)
    rest = words.pop()
    fields = _words(words)
    if any(k + "=" in rest for k in _ASSOC_KEYS.difference(fields)):
        return _words(record.split())
    return fields


def parse_assoc_mgr(text: str, where: str = "scontrol show assoc_mgr") -> list[AssocRecord]:
    """``scontrol show assoc_mgr flags=assoc``: one record per ``ClusterName=`` block.

    Reads Account, UserName (``name(uid)``), Partition, ID, the first field of
    ``SharesRaw/Norm/Level/Factor`` (raw shares; ``parent`` or 2147483647 for
    Fairshare=parent), the first of ``UsageRaw/Norm/Efctv`` (raw usage, printed
    to two decimals where sshare truncates to an integer), ``ParentAccount=name(id)``
    and the sibling order ``Lft=`` (22.05) or ``Lineage=`` (23.11+) when present.
    A block is its ``ClusterName=`` line and the indented lines after it, read as
    ``KEY=VALUE`` words (:func:`_words`; the first occurrence of a key wins).
    """
    records: list[AssocRecord] = []
    lineno = 1
    for record in _RECORDS.split(text):
        if record.startswith("ClusterName="):
            records.append(_assoc_record(_record_fields(record), where, lineno))
        lineno += record.count("\n") + 1
    return records


def _assoc_record(block: dict[str, str], where: str, start: int) -> AssocRecord:
    def at() -> str:  # only for an error
        return f"{where}: record at line {start}"

    def label() -> str:
        return f"{at()} ({account}{'/' + user if user else ''})"

    try:
        ident = int(block["ID"])
    except (KeyError, ValueError):
        raise InputError("has no numeric ID=", at()) from None
    account = block.get("Account", "")
    if not account:
        raise InputError("has no Account=", at())
    user_uid = _name_uid(block.get("UserName", ""))
    user = (user_uid[0] if user_uid else block.get("UserName", "")) or None
    part = block.get("Partition", "") or None
    shares_field = block.get("SharesRaw/Norm/Level/Factor")
    usage_field = block.get("UsageRaw/Norm/Efctv")
    if shares_field is None or usage_field is None:
        raise InputError("lacks SharesRaw/... or UsageRaw/...", at())
    raw_shares = shares_field.partition("/")[0]
    shares: int | str
    if raw_shares.lower() == "parent" or raw_shares == "2147483647":
        shares = PARENT
    else:
        try:  # what check_shares accepts, without building its label
            shares = int(raw_shares)
            valid = 0 <= shares < 0x7FFFFFFF
        except ValueError:
            valid = False
        if not valid:
            shares = check_shares(raw_shares, label())
    raw_usage = usage_field.partition("/")[0]
    try:  # likewise for check_usage
        usage = float(raw_usage)
        valid = 0.0 <= usage < math.inf
    except ValueError:
        valid = False
    if not valid:
        usage = check_usage(raw_usage, label())
    parent = _name_uid(block.get("ParentAccount", ""))
    order: int | str | None = None
    if block.get("Lineage"):
        order = block["Lineage"]
    elif block.get("Lft", "").isdigit():
        order = int(block["Lft"])
    return AssocRecord(ident, account, user, part, parent[1] if parent else None, shares, usage, order)


# --- sacctmgr show assoc -P ------------------------------------------------------------------


def parse_sacctmgr_assoc(text: str, fields: list[str], where: str = "sacctmgr show assoc") -> list[dict]:
    """``sacctmgr -nP show assoc format=<fields>``: one dict per line keyed by field name."""
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(fields):
            raise InputError(f"has {len(parts)} fields, expected {len(fields)}", f"{where}: line {lineno}")
        rows.append(dict(zip(fields, parts)))
    return rows


# --- squeue -h -a -t STATES -O SQUEUE_LONG: the jobs -------------------------------------------------
#
# One format for every reader: the daemon's push, sprio/explain/compare and push mode priority.
# Fields separated by an ASCII unit separator, which no Slurm name can hold, so that no
# user-chosen text (job names, comments, paths: none is printed) can shift a field; times as
# Unix seconds (SQUEUE_ENV).  What the fields carry, release by release (src/squeue/print.c,
# slurmctld's pack_job in job_mgr.c):
#
# * JobID (``%A``, _print_job_job_id2) prints ``step_id.job_id`` as ``%u`` in every release up to
#   26.05.3, an array task's own id included.  SLUIDs (25.11+, src/common/sluid.h: a 64-bit
#   "Slurm Lexicographically-sortable Unique ID", printed as 14 Crockford base32 characters after
#   a leading ``s``) have their own fields: squeue ``-O SLUID`` (``%s``), sprio ``%s``, sacct
#   ``SLUID``, and ``SLUID=`` in ``scontrol show job`` (details only).  None of the formats here
#   asks for one, and JobID/JobArrayID/sprio ``%i`` stay numeric, so no SLUID can reach these
#   parsers; one would fail the job-id check and be skipped like any unreadable row.
# * JobArrayID (``%i``): ``123_4``, ``123_[5-9]`` (pending tasks not yet split), ``7+1`` (het job).
# * QOS (``%q``): for a pending job its request as given (``details->qos_req``), so from 24.11 a
#   job submitted with ``--qos=hi,lo`` shows ``hi,lo``; otherwise the one QOS it runs in.
# * PriorityLong (``%Q``): ``job->priority``, one number however many partitions and QOS the job
#   competes in (the per-partition × QOS values go only to ``squeue -P`` and sprio).
# * Partition (``%P``): ``high,debug`` for a job pending in several, the one it runs in otherwise.

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


_MB_POWER = {"K": -1, "M": 0, "G": 1, "T": 2, "P": 3}


def parse_tres(text: str | None) -> dict[str, int]:
    """A TRES string (``cpu=4096,mem=64G,node=1,billing=8192,gres/gpu=4``) → counts.

    Memory (``mem``, ``bb``) is in MB: scontrol prints it converted exactly
    (``CONVERT_NUM_UNIT_EXACT``), 64G = 65536.  Other suffixes are powers of 1024.
    A new dict each call; the parse is cached per string (a few hundred distinct strings among
    thousands of jobs).
    """
    if not text or text in ("(null)", "N/A"):
        return {}
    return dict(_tres_counts(text))


@functools.lru_cache(maxsize=4096)
def _tres_counts(text: str) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}
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
    return tuple(out.items())


def _epoch(text: str) -> int:
    t = text.strip()
    if t in ("", "Unknown", "None", "N/A", "0"):
        return 0
    if t.isdigit():
        return int(t)
    raise InputError(f"time {t!r} is not Unix seconds (was SLURM_TIME_FORMAT=%s honoured?)")


@functools.lru_cache(maxsize=1024)
def _time_limit(text: str) -> int | None:
    """squeue's TimeLimit → minutes; INFINITE for UNLIMITED, None when unset (the partition's applies)."""
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE"):
        return INFINITE
    if t in ("NOT_SET", "PARTITION_LIMIT", "N/A", ""):
        return None
    return time_str_seconds(text, default_unit="minutes") // 60


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
                "state": state, "submit_time": _epoch(submit), "eligible_time": _epoch(eligible),
                "accrue_time": _epoch(accrue),
                "cpus": int(cpus), "min_nodes": int(tres.get("node") or nodes or 1),
                "time_limit": _time_limit(time_limit), "tres": tres, "reason": reason})
        except (ValueError, InputError) as exc:
            skip_or_raise(skipped, f"cannot read the job: {exc}", f"{where}: line {lineno} (job {job_id})")
    return rows


# --- sprio -h -o SPRIO_FORMAT: site factor and operator-set priorities ------------------------------

SPRIO_FIELDS = ("%i", "%r", "%S", "%N", "%a", "%b", "%f", "%j", "%p", "%q", "%T")
SPRIO_FORMAT = SEP.join(SPRIO_FIELDS)


@dataclass(frozen=True)
class SprioFacts:
    site_factor: int
    direct_set_prio: bool


def parse_sprio_facts(text: str, where: str = "sprio", bad_jobs: set[int] | None = None,
                      skipped: list[str] | None = None) -> dict[int, SprioFacts]:
    """``sprio -h -o SPRIO_FORMAT`` → per job: its SiteFactor and whether an operator set its priority.

    sprio shows an operator-set (``direct_set_prio``) job with every factor 0 and
    SITE/NICE 0 (one partition) or SITE/NICE −2^31 (several partitions: sprio's
    ``_filter_job`` drops the direct priority there).  A job whose factors are
    genuinely all 0 with SITE and NICE 0 has priority 1 either way, so calling it
    operator-set changes nothing.

    With ``bad_jobs`` given, a job whose rows cannot be read is added to it (and noted in
    ``skipped``) instead of failing the read: its caller must then leave that job out, since
    whether an operator set its priority is unknown.  A row that names no job id still fails.
    """
    rows: dict[int, list[list[str]]] = {}
    unreadable: dict[int, str] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(SEP)]
        try:
            job_id = int(parts[0])
        except ValueError:
            raise InputError(f"unexpected line {line!r}", f"{where}: line {lineno}") from None
        if len(parts) != len(SPRIO_FIELDS):
            unreadable[job_id] = (f"{where}: line {lineno}: has {len(parts)} fields, "
                                  f"expected {len(SPRIO_FIELDS)}")
            continue
        seen = rows.get(job_id)
        if seen is None:
            rows[job_id] = [parts]
        else:
            seen.append(parts)
    out: dict[int, SprioFacts] = {}
    shared: dict[tuple[int, bool], SprioFacts] = {}  # immutable: jobs with the same facts share them
    for job_id, rs in rows.items():
        if job_id in unreadable:
            continue
        try:
            site = int(rs[0][2])
            nice = int(rs[0][3])
            zero = all(float(v) == 0 for r in rs for v in r[4:10]) and not any(r[10] for r in rs)
        except ValueError:
            unreadable[job_id] = f"{where}: job {job_id}: non-numeric factors"
            continue
        if len(rs) > 1:  # several partitions: 22.05's _filter_job prints SITE/NICE −2^31 for it;
            # from 23.11 on every partition's row shows the set priority with all factors 0
            direct = (site == -NICE_OFFSET and nice == -NICE_OFFSET) or (zero and site == 0 and nice == 0)
        else:
            direct = zero and site == 0 and nice == 0
        facts = (0 if direct else site, direct)
        out[job_id] = shared.get(facts) or shared.setdefault(facts, SprioFacts(*facts))
    if unreadable:
        if bad_jobs is None:
            raise InputError(next(iter(unreadable.values())))
        bad_jobs.update(unreadable)
        if skipped is not None:
            skipped.extend(unreadable.values())
    return out


# --- the state file and sshare -----------------------------------------------------------------------


def parse_decay_state(data: bytes) -> tuple[int, int] | None:
    """``StateSaveLocation/priority_last_decay_ran``: pack_time(last_ran), pack_time(last_reset),
    two big-endian int64 (priority_multifactor.c); None when the file is shorter."""
    if len(data) < 16:
        return None
    last_ran, last_reset = struct.unpack(">qq", data[:16])
    return last_ran, last_reset


def parse_last_decay_ran(data: bytes) -> int | None:
    """When slurmctld last recalculated every job's priority (0, unset: None)."""
    state = parse_decay_state(data)
    return (state[0] or None) if state else None


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
        "weight_tres_text": (None if raw.get("PriorityWeightTRES") in (None, "", "(null)")
                             else raw["PriorityWeightTRES"]),
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
            raise InputError("has a non-numeric PriorityJobFactor/PriorityTier",
                             f"{where}: line {lineno}") from None
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
    """FairShare of every user row of ``sshare -a -l -P [-m]`` (or ``-p``), keyed (account, user,
    partition)."""
    if not text.strip():
        return {}
    return parse_sshare(io.StringIO(text), "sshare -a -l -P -m").reported_fairshare


# --- reading it all ---------------------------------------------------------------------------------
