"""The snapshot file's strict shape: every key known, every weight and count non-negative, every
PriorityFlag one Slurm has.  A misspelt key is refused with its path (``config.weight_fairshar``,
``priority_inputs.jobs[3].nicee``), never ignored: a silently dropped weight would change every
figure.  The readers (:mod:`.snapshot`, :mod:`.priority_snapshot`) convert after this check.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..model import InputError
from ..slurm.units import NICE_OFFSET

NICE_MAX = NICE_OFFSET - 3  # scontrol update nice: refused beyond

# What scontrol show config prints in PriorityFlags (priority_flags_string, slurm_protocol_defs.c,
# 22.05 to 26.05), and FAIR_TREE, the flag of the releases before 19.05.
PRIORITY_FLAGS = ("ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "FAIR_TREE", "INCR_ONLY",
                  "MAX_TRES", "MAX_TRES_GRES", "NO_FAIR_TREE", "NO_NORMAL_ALL", "NO_NORMAL_ASSOC",
                  "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES", "SMALL_RELATIVE_TO_TIME")

Count = Annotated[int, Field(ge=0)]
Weight = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]  # PriorityWeight*: uint32 in slurm.conf


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateLimit(_Strict):
    bucket_size: Annotated[int, Field(ge=1)]
    refill_rate: Annotated[int, Field(ge=1)]
    refill_period: Annotated[int, Field(ge=1)]


class SnapshotConfig(_Strict):
    """``config``: the keys every source writes (slurm.config.priority_config and priority_config_extra,
    the pyslurm source's, the demo's) and ``priority_levels``."""

    cluster_name: str | None = None
    slurm_version: str | None = None
    priority_type: str | None = None
    priority_flags: list[str] | None = None
    dampening: float | None = None  # checked further by snapshot._check_config
    priority_levels: int | None = None
    half_life_seconds: Count | None = None
    calc_period_seconds: Count | None = None
    usage_reset_period: str | None = None
    max_age_seconds: Count | None = None
    favor_small: bool | None = None
    weight_age: Weight | None = None
    weight_assoc: Weight | None = None
    weight_fairshare: Weight | None = None
    weight_jobsize: Weight | None = None
    weight_partition: Weight | None = None
    weight_qos: Weight | None = None
    # PriorityWeightTRES: slurm.conf reads each with strtod, so a negative weight is a real setting
    # (a TRES that lowers priority); refusing one made a snapshot of such a cluster unreadable
    weight_tres: dict[str, float] | None = None
    weight_tres_exact: dict[str, float] | None = None
    weight_tres_text: str | None = None
    tres_order: list[str] | None = None
    accounting_storage_enforce: list[str] | None = None
    site_factor_plugin: str | None = None
    state_save_location: str | None = None
    slurm_conf: str | None = None
    no_normal_ambiguous: bool | None = None
    rate_limit: RateLimit | None = None  # slurmctld's rl_enable (slurm.config.rate_limit)
    slurm_user_uid: Count | None = None
    private_data: list[str] | None = None  # PrivateData, lower case (slurm.config.private_data)

    @field_validator("priority_flags")
    @classmethod
    def _flags(cls, flags):
        for f in flags or []:
            if str(f).strip().upper() not in PRIORITY_FLAGS:
                raise ValueError(f"unknown PriorityFlag {f!r} (Slurm's: {', '.join(PRIORITY_FLAGS)})")
        return flags


class Partition(_Strict):
    name: str
    priority_job_factor: Count = 1
    priority_tier: Count = 1
    max_time: Count | None = None
    tres: dict[str, Count] = {}


class Cluster(_Strict):
    node_count: Annotated[int, Field(ge=1)] = 1
    cpu_count: Annotated[int, Field(ge=1)] = 1
    assoc_priority_max: Count = 0
    tres_order: list[str] | None = None
    qos: dict[str, Count] = {}
    partitions: list[Partition] = []


class JobRecord(_Strict):
    job_id: Annotated[int, Field(ge=1)]
    user: str
    account: str
    partitions: list[str]
    qos: str = "normal"
    priority: Count | None = None
    nice: Annotated[int, Field(ge=-NICE_MAX, le=NICE_MAX)] = 0  # scontrol's bound: |nice| <= NICE_OFFSET - 3
    state: str = "PENDING"
    display_id: str | None = None
    site_factor: int | None = None
    direct_set_prio: bool = False
    submit_time: Count | None = None
    eligible_time: Count | None = None
    accrue_time: Count | None = None
    min_nodes: Count | None = None
    cpus: Count | None = None
    time_limit: Count | None = None
    tres: dict[str, Count] = {}
    assoc_priority: Count | None = None
    reason: str = ""


class FairshareRow(_Strict):
    account: str
    user: str | None
    partition: str | None = None
    fairshare: Annotated[float, Field(ge=0, le=1)]


class PriorityInputsBlock(_Strict):
    version: Literal[1]
    evaluated_at: float | None = None
    last_calc: float | None = None
    cluster: Cluster = Cluster()
    jobs: list[JobRecord] = []
    slurm_fairshare: list[FairshareRow] | None = None


TOP_KEYS = ("schema", "version", "cluster", "source", "taken_at", "sibling_order", "config", "associations",
            "priority_inputs")


def _where(loc: tuple, prefix: str) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check(model: type[BaseModel], data: object, name: str, prefix: str) -> None:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _where(tuple(err["loc"]), prefix)
        if err["type"] == "extra_forbidden":
            shown = where if where.isprintable() else repr(where)  # one line, always
            raise InputError(f"unknown key {shown}", name) from None
        msg = err["msg"].removeprefix("Value error, ")
        raise InputError(f"{where}: {msg}", name) from None


def check_top_level(doc: dict, name: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in TOP_KEYS)
    if unknown:
        shown = unknown[0] if unknown[0].isprintable() else repr(unknown[0])
        raise InputError(f"unknown key {shown} (a snapshot's keys: {', '.join(TOP_KEYS)})", name)


def check_config(config: dict, name: str) -> None:
    _check(SnapshotConfig, config, name, "config")


def check_priority_inputs(block: object, name: str) -> None:
    _check(PriorityInputsBlock, block, name, "priority_inputs")


__all__ = ["PRIORITY_FLAGS", "check_config", "check_priority_inputs", "check_top_level"]
