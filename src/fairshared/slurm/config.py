"""``scontrol show config`` and slurm.conf: the settings fairshared needs, in base units.  Pure.

``scontrol show config`` prints ``Key = Value`` lines (22.05 to 26.05); durations as Slurm time
strings (:func:`fairshared.slurm.units.time_str_seconds`), PriorityWeightTRES as written in
slurm.conf (:func:`fairshared.slurm.tres.parse_tres_weights`).  Release differences: PriorityFlags
(before 25.11 ``NO_NORMAL_ALL`` stands for any NO_NORMAL_* flag: :func:`priority_config_extra`).
"""

from __future__ import annotations

import re

from ..model import Controllers, InputError
from ..settings import dampening_factor
from .tres import parse_tres_weights
from .units import time_str_seconds
from .versions import NO_NORMAL_NAMED, RATE_LIMIT, release_of, version_tuple


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = Value`` lines into a dict (first occurrence wins); indexed
    keys keep their index (``SlurmctldHost[1]``)."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z_][\w/]*(?:\[\d+\])?)\s*=\s?(.*)$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2).strip()
    return out


def _int(v: str | None, default: int = 0) -> int:
    """A PriorityWeight* as scontrol prints it; ``default`` when absent or not a number."""
    if v is None:
        return default
    try:
        return int(v)
    except ValueError:
        return default


def priority_config(raw: dict[str, str]) -> dict:
    """The priority settings fairshared needs, with Slurm's defaults, in base units.

    Keys: cluster_name, slurm_version, priority_type, priority_flags (list),
    dampening, half_life_seconds, calc_period_seconds, usage_reset_period,
    max_age_seconds, favor_small, weight_{age,assoc,fairshare,jobsize,partition,qos},
    weight_tres (dict), accounting_storage_enforce (list), site_factor_plugin, rate_limit,
    slurm_user_uid, private_data (list).

    ``weight_tres`` is PriorityWeightTRES as slurmctld reads it, unit suffixes applied
    (:func:`fairshared.slurm.tres.parse_tres_weights`: ``Mem=0.25G`` is 0.25/1024 per MB); a weight
    slurmctld would refuse is an :class:`InputError` naming it (slurmctld would not have started).
    """
    flags = [f.strip().upper() for f in raw.get("PriorityFlags", "").split(",") if f.strip()]
    tres = parse_tres_weights(raw.get("PriorityWeightTRES"), "PriorityWeightTRES")
    enforce = [e.strip().lower() for e in raw.get("AccountingStorageEnforce", "").split(",") if e.strip()]
    plugin = raw.get("PrioritySiteFactorPlugin", "(null)")
    return {
        "cluster_name": raw.get("ClusterName"),
        "slurm_version": raw.get("SLURM_VERSION"),
        "priority_type": raw.get("PriorityType", "priority/basic"),
        "priority_flags": flags,
        "dampening": _dampening(raw.get("FairShareDampeningFactor")),
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
        "private_data": private_data(raw.get("PrivateData")),
    }


def _dampening(text: str | None) -> int:
    """``FairShareDampeningFactor = 3`` → 3; 1 when scontrol prints none (read_config.c's default); else
    Slurm's rule (:func:`fairshared.settings.dampening_factor`), an :class:`InputError` naming the key."""
    if text is None:
        return 1
    try:
        return dampening_factor(text)
    except ValueError as exc:
        raise InputError(f"FairShareDampeningFactor: {exc}", "scontrol show config") from None


def private_data(text: str | None) -> list[str]:
    """``PrivateData = accounts,jobs,usage,users`` → those names, lower case; ``none`` (what
    scontrol prints when nothing is private: private_data_string, slurm_protocol_defs.c) → []."""
    names = [p.strip().lower() for p in (text or "").split(",") if p.strip()]
    return [] if names == ["none"] else names


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
    if "rl_enable" not in text or (version and (0, 0) < version_tuple(version) < RATE_LIMIT):
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


def priority_config_extra(raw: dict[str, str]) -> dict:
    """Extra snapshot-config keys for the job priority, from ``scontrol show config``.

    * ``weight_tres_exact``: PriorityWeightTRES with unit suffixes applied (Mem=2G);
    * ``weight_tres_text``: PriorityWeightTRES as written (what ``sprio -w`` prints), or None;
    * ``tres_order``: AccountingStorageTRES (the order sprio lists TRES in);
    * ``state_save_location``, ``slurm_conf``: where slurmctld keeps its state / its config;
    * ``no_normal_ambiguous``: the printed flags say NO_NORMAL_ALL on a release that prints it
      for any NO_NORMAL_* flag (before 25.11: :func:`fairshared.sources.jobinfo_cli.no_normal_flags`).
    """
    flags = raw.get("PriorityFlags", "")
    tres_order = [t.strip().lower() for t in raw.get("AccountingStorageTRES", "").split(",") if t.strip()]
    return {
        "weight_tres_exact": parse_tres_weights(raw.get("PriorityWeightTRES"), "PriorityWeightTRES"),
        "weight_tres_text": (None if raw.get("PriorityWeightTRES") in (None, "", "(null)")
                             else raw["PriorityWeightTRES"]),
        "tres_order": tres_order or None,
        "state_save_location": raw.get("StateSaveLocation"),
        "slurm_conf": raw.get("SLURM_CONF"),
        "no_normal_ambiguous": ("NO_NORMAL_ALL" in flags.upper()
                                and release_of(raw.get("SLURM_VERSION")) < NO_NORMAL_NAMED),
    }


def parse_slurm_conf_flags(text: str) -> str | None:
    """The last ``PriorityFlags=`` value in slurm.conf text (comments stripped), or None."""
    value = None
    for line in text.split("\n"):
        line = line.split("#", 1)[0]
        for m in re.finditer(r"(?i)\bPriorityFlags\s*=\s*(\S*)", line):
            value = m.group(1)
    return value

