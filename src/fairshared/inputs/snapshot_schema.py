"""The snapshot file's strict shape: every key known, every weight and count non-negative, every
PriorityFlag one Slurm has.  A misspelt key is refused with its path (``config.weight_fairshar``,
``priority_inputs.jobs[3].nicee``), never ignored: a silently dropped weight would change every
figure.  The readers (:mod:`.snapshot`, :mod:`.priority_snapshot`) convert after this check.

The ``config`` part is not written out here: :data:`SnapshotConfig` is built from the
:class:`~fairshared.settings.ClusterSettings` dataclass, each field with its type and the range its
``metadata`` gives (a weight a uint32, a time never negative), so a setting added there is a key a
snapshot may hold, with no second edit; only what a file must hold beyond its type is added here
(``rate_limit``'s three keys, the PriorityFlags Slurm has).  Before, a hand-written copy refused a
negative PriorityWeightTRES the settings held, and a cluster's snapshot would not read back.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from ..model import InputError
from ..settings import ClusterSettings, setting_types
from ..slurm.units import NICE_OFFSET

NICE_MAX = NICE_OFFSET - 3  # scontrol update nice: refused beyond

# What scontrol show config prints in PriorityFlags (priority_flags_string, slurm_protocol_defs.c,
# 22.05 to 26.05), and FAIR_TREE, the flag of the releases before 19.05.
PRIORITY_FLAGS = ("ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "FAIR_TREE", "INCR_ONLY",
                  "MAX_TRES", "MAX_TRES_GRES", "NO_FAIR_TREE", "NO_NORMAL_ALL", "NO_NORMAL_ASSOC",
                  "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES", "SMALL_RELATIVE_TO_TIME")

Count = Annotated[int, Field(ge=0)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateLimit(StrictModel):
    bucket_size: Annotated[int, Field(ge=1)]
    refill_rate: Annotated[int, Field(ge=1)]
    refill_period: Annotated[int, Field(ge=1)]


class _ConfigChecks(StrictModel):
    """What a snapshot's ``config`` must hold beyond each field's type."""

    @field_validator("priority_flags", check_fields=False)
    @classmethod
    def _flags(cls, flags):
        for f in flags or []:
            if str(f).strip().upper() not in PRIORITY_FLAGS:
                raise ValueError(f"unknown PriorityFlag {f!r} (Slurm's: {', '.join(PRIORITY_FLAGS)})")
        return flags


# fields whose value a snapshot holds to more than their type: slurmctld's rl_enable (slurm.config.rate_limit)
REFINED: dict[str, Any] = {"rate_limit": RateLimit}


def _without_none(tp: Any) -> Any:
    """``X | None`` → X (the snapshot allows null for every key: it means the default)."""
    if get_origin(tp) in (Union, type(int | None)):
        rest = [a for a in get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else Union[tuple(rest)]
    return tp


def config_model(cls: type[ClusterSettings] = ClusterSettings) -> type[BaseModel]:
    """``config``'s model from :class:`ClusterSettings`: every setting
    (:func:`fairshared.settings.setting_types`) a key, null or of the field's type within the range
    of the field's ``metadata`` (``ge``/``le``), refined by :data:`REFINED`."""
    ranges = {f.name: dict(f.metadata) for f in fields(cls)}
    spec: dict[str, Any] = {}
    for name, tp in setting_types(cls).items():
        base = REFINED.get(name, _without_none(tp))
        if ranges[name]:
            base = Annotated[base, Field(**ranges[name])]
        spec[name] = (Optional[base], None)
    return create_model("SnapshotConfig", __base__=_ConfigChecks, **spec)


SnapshotConfig = config_model()


class Partition(StrictModel):
    name: str
    priority_job_factor: Count = 1
    priority_tier: Count = 1
    max_time: Count | None = None
    tres: dict[str, Count] = {}


class Cluster(StrictModel):
    node_count: Annotated[int, Field(ge=1)] = 1
    cpu_count: Annotated[int, Field(ge=1)] = 1
    assoc_priority_max: Count = 0
    tres_order: list[str] | None = None
    qos: dict[str, Count] = {}
    partitions: list[Partition] = []


class JobRecord(StrictModel):
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


class FairshareRow(StrictModel):
    account: str
    user: str | None
    partition: str | None = None
    fairshare: Annotated[float, Field(ge=0, le=1)]


class PriorityInputsBlock(StrictModel):
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
