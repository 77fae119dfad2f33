"""The cluster's priority settings, typed: :class:`ClusterSettings`, built once per read.

Every source builds one from the document it reads (``scontrol show config`` through
:func:`fairshared.slurm.config.priority_config`, pyslurm, the demo, a snapshot file's ``config``)
with :meth:`ClusterSettings.from_dict`; a setting the document leaves out (or gives as null) has
Slurm's default (read_config.c).  :meth:`ClusterSettings.to_dict` gives the document back with the
same keys, in the same order, with the same values: a snapshot file reads and writes unchanged
(docs/snapshot-format.md).  Plain data; imports nothing of fairshared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import get_args, get_origin, get_type_hints

DAY = 86400
NO_NORMAL = ("NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES")
FACTOR_NAMES = ("age", "assoc", "fairshare", "jobsize", "partition", "qos")  # PriorityWeight<Name>, in sprio's order


def slurm_priority_flags(written) -> frozenset[str]:
    """PriorityFlags as slurmctld parses them (read_config.c, 22.05 to 26.05): case-insensitive
    *substring* matches (``xstrcasestr``) on the whole value, so ``no_fair_tree`` counts and so does a
    flag inside a longer word.  ``DEPTH_OBLIVIOUS`` also clears Fair Tree (NO_FAIR_TREE);
    ``MAX_TRES_GRES`` excludes ``MAX_TRES`` (an else-if); ``NO_NORMAL_ALL`` sets the four NO_NORMAL_*.
    ``written``: a string or the list a source read."""
    up = (written if isinstance(written, str) else ",".join(str(f) for f in written)).upper()
    out = {f for f in ("ACCRUE_ALWAYS", "SMALL_RELATIVE_TO_TIME", "CALCULATE_RUNNING", "INCR_ONLY", *NO_NORMAL)
           if f in up}
    if "DEPTH_OBLIVIOUS" in up:
        out |= {"DEPTH_OBLIVIOUS", "NO_FAIR_TREE"}
    elif "NO_FAIR_TREE" in up:
        out.add("NO_FAIR_TREE")
    if "MAX_TRES_GRES" in up:
        out.add("MAX_TRES_GRES")
    elif "MAX_TRES" in up:
        out.add("MAX_TRES")
    if "NO_NORMAL_ALL" in up:
        out.update(NO_NORMAL)
    return frozenset(out)


# The range a field's value must lie in (``metadata`` of its field, plain data): what a snapshot file is
# held to (inputs/snapshot_schema.py builds its schema from these fields, their types and these ranges).
COUNT = {"ge": 0}  # a time in seconds or an id: never negative
UINT32 = {"ge": 0, "le": 0xFFFFFFFF}  # PriorityWeight<Factor>: uint32 in slurm.conf

DAMPENING_MAX = 0xFFFF  # FairShareDampeningFactor is a uint16 in slurm.conf


def dampening_factor(value: object) -> int:
    """FairShareDampeningFactor by the rule slurmctld applies, the one rule for every place a
    dampening comes from (scontrol show config, pyslurm, the demo, a snapshot's ``config.dampening``,
    the daemon's ``algorithm.dampening``, ``--dampening``): a whole number from 0 to 65535.

    slurm.conf reads it as a uint16 (read_config.c ``{"FairShareDampeningFactor", S_P_UINT16}``;
    parse_value.c ``s_p_handle_uint16`` refuses text that is not a number, a negative value and
    anything above 65535), 1 only when slurm.conf leaves it out, and the multifactor plugin keeps it
    in a ``uint16_t``.  0 is a value slurm.conf accepts (``scontrol update FairShareDampeningFactor=0``
    refuses it, scontrol.c): it passes here, and only the classic formula, which divides by it,
    refuses it (:data:`fairshared.engine.classic.ZERO_DAMPENING`).  ``value``: a number (a whole
    float such as ``2.0``, as TOML and JSON may write it; not a bool) or its decimal digits (as
    scontrol prints it, as typed on a command line).  The whole number, or ValueError stating the
    rule; the caller puts the culprit in front (``config.dampening: ...``)."""
    number: int | None = None
    if isinstance(value, str):
        text = value.strip()
        number = int(text) if text.isascii() and text.isdigit() else None
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():  # not nan, not ±inf
        number = int(value)
    if number is None or not 0 <= number <= DAMPENING_MAX:
        raise ValueError(f"{value!r} is not a whole number from 0 to {DAMPENING_MAX} "
                         "(FairShareDampeningFactor is a uint16 in slurm.conf)")
    return number


@dataclass(frozen=True)
class ClusterSettings:
    """The settings fairshared reads, in base units (seconds), with Slurm's defaults.

    ``given``: the keys of the document it was built from, in order (``to_dict`` writes those);
    ``unset``: the keys among them given as null (their field holds the default).  A field keeps its
    value as the document wrote it (``1000.0`` stays a float, a TRES name its case), so a file reads
    and writes unchanged; the job priority reads the weights through :attr:`weights` and
    :attr:`tres_weights`, which give them as slurmctld holds them.  Not slotted: the derived views
    (:attr:`flags`, :attr:`weights`, :attr:`tres_weights`) are worked out once per instance
    (``cached_property``), not once per job."""

    cluster_name: str | None = None
    slurm_version: str | None = None  # SLURM_VERSION, e.g. "25.11.7"
    priority_type: str = "priority/basic"
    priority_flags: tuple[str, ...] = ()  # as the source wrote them; ``flags`` is the upper-cased set
    dampening: float = 1  # FairShareDampeningFactor: dampening_factor's rule (an int, or a whole float as written)
    priority_levels: int | None = None  # Fair Tree's levels of FSRaw bits (snapshot files only)
    half_life_seconds: int = field(default=7 * DAY, metadata=COUNT)  # PriorityDecayHalfLife
    calc_period_seconds: int = field(default=300, metadata=COUNT)  # PriorityCalcPeriod
    usage_reset_period: str = "NONE"  # PriorityUsageResetPeriod, upper case
    max_age_seconds: int = field(default=7 * DAY, metadata=COUNT)  # PriorityMaxAge
    favor_small: bool = False  # PriorityFavorSmall
    weight_age: int = field(default=0, metadata=UINT32)
    weight_assoc: int = field(default=0, metadata=UINT32)
    weight_fairshare: int = field(default=0, metadata=UINT32)
    weight_jobsize: int = field(default=0, metadata=UINT32)
    weight_partition: int = field(default=0, metadata=UINT32)
    weight_qos: int = field(default=0, metadata=UINT32)
    # PriorityWeightTRES: slurm.conf reads each with strtod, so a negative weight is a real setting
    # (a TRES that lowers priority): no range
    weight_tres: Mapping[str, float] = field(default_factory=dict)  # PriorityWeightTRES, per base unit
    weight_tres_exact: Mapping[str, float] | None = None  # the same, from scontrol (priority_config_extra)
    weight_tres_text: str | None = None  # PriorityWeightTRES as written (sprio -w prints it)
    tres_order: tuple[str, ...] | None = None  # AccountingStorageTRES
    accounting_storage_enforce: tuple[str, ...] = ()
    site_factor_plugin: str | None = None
    state_save_location: str | None = None
    slurm_conf: str | None = None
    no_normal_ambiguous: bool = False  # NO_NORMAL_ALL printed for any NO_NORMAL_* flag (before 25.11)
    rate_limit: Mapping[str, int] | None = None  # rl_enable: bucket_size, refill_rate, refill_period
    slurm_user_uid: int | None = field(default=None, metadata=COUNT)
    # PrivateData, lower case as scontrol prints it ("none": empty): what slurmctld hides from users
    # who are not operators (the daemon's API honours accounts, jobs, usage and users: api/identity.py)
    private_data: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    unset: frozenset[str] = frozenset()

    @cached_property
    def flags(self) -> frozenset[str]:
        """PriorityFlags as Slurm takes them (:func:`slurm_priority_flags`): the one reading every
        module asks, so that DEPTH_OBLIVIOUS means NO_FAIR_TREE and NO_NORMAL_ALL its four flags
        everywhere."""
        return slurm_priority_flags(self.priority_flags)

    @property
    def printed_flags(self) -> frozenset[str]:
        """PriorityFlags as the source printed them, upper case: only for what a release prints
        ambiguously (NO_NORMAL_ALL for any NO_NORMAL_* flag before 25.11)."""
        return frozenset(str(f).strip().upper() for f in self.priority_flags)

    @cached_property
    def weights(self) -> Mapping[str, int]:
        """The six PriorityWeight<Factor>, by factor name (:data:`FACTOR_NAMES`), as the integers
        slurmctld holds (uint32; a snapshot may write ``1000.0``)."""
        return {name: int(getattr(self, f"weight_{name}")) for name in FACTOR_NAMES}

    @cached_property
    def tres_weights(self) -> Mapping[str, float]:
        """PriorityWeightTRES as the job priority uses it, TRES name (lower case) → weight per base
        unit: the exact weights when read (``weight_tres_exact``), else ``weight_tres``."""
        chosen = self.weight_tres if self.weight_tres_exact is None else self.weight_tres_exact
        return {str(k).lower(): float(v) for k, v in chosen.items()}

    def with_weights(self, overrides: Mapping[str, float]) -> ClusterSettings:
        """A copy with some job-priority weights replaced (``--weights``, a push mode's fair-share
        weight): keys age, assoc, fairshare, jobsize, partition, qos (made integers) and tres:NAME
        (a float, the name lower-cased); ValueError on any other key.  A TRES weight replaces the
        one :attr:`tres_weights` reads (the exact weights when they were read)."""
        kw: dict = {}
        tres = dict(self.tres_weights)
        for k, v in overrides.items():
            if k.startswith("tres:"):
                tres[k[5:].lower()] = float(v)
            elif k in FACTOR_NAMES:
                kw[f"weight_{k}"] = int(v)
            else:
                raise ValueError(f"unknown weight {k!r}")
        if tres != self.tres_weights:
            kw["weight_tres" if self.weight_tres_exact is None else "weight_tres_exact"] = tres
        return replace(self, **kw)

    @classmethod
    def from_dict(cls, doc: Mapping) -> ClusterSettings:
        """From a settings document (keys as in :func:`fairshared.slurm.config.priority_config` and
        ``priority_config_extra``, the demo's, a snapshot file's ``config``); ValueError on an unknown key."""
        kw: dict = {}
        unset = set()
        for key, value in doc.items():
            if key not in _SETTINGS:
                raise ValueError(f"unknown cluster setting {key!r}")
            if value is None:
                unset.add(key)
            else:
                kw[key] = _typed(key, value)
        return cls(**kw, given=tuple(doc), unset=frozenset(unset))

    def to_dict(self) -> dict:
        """The document this was built from (with what :meth:`with_values` changed): JSON-ready."""
        return {k: None if k in self.unset else _plain(getattr(self, k)) for k in self.given}

    def with_values(self, **values) -> ClusterSettings:
        """A copy with these settings replaced or added (added ones go last in ``to_dict``)."""
        given = self.given + tuple(k for k in values if k not in self.given)
        unset = {k for k in self.unset if k not in values} | {k for k, v in values.items() if v is None}
        typed = {k: _DEFAULTS[k] if v is None else _typed(k, v) for k, v in values.items()}
        return replace(self, **typed, given=given, unset=frozenset(unset))


def setting_types(cls: type[ClusterSettings] = ClusterSettings) -> dict[str, object]:
    """Each setting (every field but ``given`` and ``unset``) → its type, from the dataclass itself:
    what :meth:`ClusterSettings.from_dict` checks a value against and what the snapshot schema is
    built from (inputs/snapshot_schema.py), so a field added here is known to both."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls) if f.name not in ("given", "unset")}


def _kind(tp: object) -> str:
    """What ``_typed`` checks for a field of type ``tp`` (``X | None``: X's)."""
    inner = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) is not None else [tp]
    t = inner[0] if len(inner) == 1 else tp
    origin = get_origin(t) or t
    if origin is tuple:
        return "tuple"
    if origin is Mapping:
        return "mapping"
    if t in (bool, int, float, str):
        return {bool: "bool", int: "int", float: "number", str: "str"}[t]
    raise TypeError(f"ClusterSettings: no check for a field of type {tp!r}")  # at import: add one


_TYPES = setting_types()
_SETTINGS = tuple(_TYPES)
_DEFAULTS = {k: getattr(ClusterSettings(), k) for k in _SETTINGS}
_KINDS = {k: _kind(tp) for k, tp in _TYPES.items()}


def _typed(key: str, value):
    """``value`` for field ``key``, checked against its type (ValueError naming the key when it is not)."""
    kind = _KINDS[key]
    if kind == "tuple":
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    elif kind == "mapping":
        ok = isinstance(value, Mapping) and all(isinstance(k, str) and _number(v) for k, v in value.items())
        value = dict(value) if ok else value
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif key == "dampening":
        ok = _number(value)
        if ok:
            try:
                dampening_factor(value)
            except ValueError as exc:
                raise ValueError(f"cluster setting dampening: {exc}") from None
    elif kind == "number":
        ok = _number(value)
    elif kind == "int":
        # a whole float too (3600.0: a snapshot file may hold one; kept as written, for the file's sake)
        ok = _number(value) and float(value).is_integer()
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ValueError(f"cluster setting {key} = {value!r} is not of its type")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plain(value):
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value
