"""Slurm's multifactor job priority, factor by factor.  Pure: no I/O, no Slurm imports.

What ``priority/multifactor`` computes for a pending job (Slurm 22.05.8,
src/plugins/priority/multifactor/priority_multifactor.c: ``set_priority_factors``
fills the factors, ``_get_priority_internal`` weighs and sums them)::

    P = Wage·age + Wassoc·assoc + Wfs·fairshare + Wjs·jobsize + Wpart·partition + Wqos·qos
        + Σ_t Wtres_t·tres_t + site_factor − nice
    P = max(P, 1); truncated to an integer; above 2^32 − 1 it is cut to 2^32 − 1

and what ``sprio -l`` prints from it (src/sprio/print.c).  The fair-share factor
itself comes from :mod:`fairshared.engine` (the job's user association in the
engine's :class:`~fairshared.engine.result.Result`); everything else is here.

Each factor has its own function below, opening with a two-line comment: the
formula, then its range.  ``job_factors`` puts them together for one job and
partition, ``job_priority`` is slurmctld's number, ``sprio_rows`` is what sprio
shows (one row per partition of a multi-partition job) and ``render_sprio`` is
sprio's ``-l`` table, byte for byte.

Slurm quirks reproduced on purpose (all read in the 22.05.8 source; the operator-set rows, the
cut SITE and NO_NORMAL_ALL also seen on a live 22.05.8):

* sprio's PRIORITY column is *re-summed by sprio* from the weighted factors it
  received (``get_priority_from_factors``), not the job's priority: it is not
  clamped at 2^32 − 1, and the factors have made a round trip through
  ``packdouble`` (×10^6, ÷10^6) on the way.
* Weighted columns print as ``%.0f`` (round half to even), PRIORITY as a
  truncating ``(long long)`` cast.
* A job whose priority an operator set (``scontrol update priority=N``, or
  ``--priority`` at submission: ``direct_set_prio``) keeps N; sprio shows zero
  factors for it.  For such a job in *several* partitions sprio's ``_filter_job``
  copies the zeroed factors without the direct priority: SITE and NICE print as
  −2^31 (SITE cut to 10 characters, ``-214748364``) and PRIORITY as the
  partition factor alone.
* 22.05's ``scontrol show config`` prints ``NO_NORMAL_ALL`` as soon as *any*
  NO_NORMAL_* flag is set (``priority_flags_string``); see
  :func:`fairshared.settings.slurm_priority_flags`.

Not reproduced (rare): for a multi-partition job sprio re-weights a TRES factor that is 0 in one
partition but not in the job's current one (``_get_tres_factors`` leaves the copied, already
weighted value and ``_get_tres_prio_weighted`` multiplies it again); and with
SMALL_RELATIVE_TO_TIME and no job time limit, a multi-partition job's size uses its first
partition's MaxTime (slurmctld uses whichever partition ``part_ptr`` last pointed to).

From 24.11 a job may ask for several QOS (``--qos=a,b``): slurmctld keeps them sorted by QOS
Priority, highest first (``_get_qos_ptr_list``: ``priority_sort_qos_desc``), computes the job's
own priority with the first, and a priority per partition × QOS (``priority_array``,
``_priority_each_partition`` / ``_priority_each_qos``); sprio shows one row per partition × QOS
(``_create_prio_list_part`` / ``_create_prio_list_qos``), QOS inner.  Reproduced, quirk included:
a QOS whose Priority is 0 (or PriorityWeightQOS=0) does not replace the QOS factor, so its rows
keep the first QOS's.  ``PRIORITY_FLAGS_MAX_TRES_GRES`` (25.05) only changes billing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import DEFAULT_TRES_ORDER, ClusterInfo, Job, PartitionInfo
from .settings import FACTOR_NAMES, NO_NORMAL, ClusterSettings  # noqa: F401  (NO_NORMAL, FACTOR_NAMES: re-exported)
from .slurm.units import INFINITE, NICE_OFFSET

PRIORITY_MAX = 0xFFFFFFFF  # 2^32 − 1
FLOAT_MULT = 1_000_000.0  # packdouble(): doubles travel as bits of x·10^6

# --- inputs -------------------------------------------------------------------------------------


# The weights and switches are the cluster's own :class:`~fairshared.settings.ClusterSettings`
# (``weights``, ``tres_weights``, ``max_age_seconds``, ``favor_small``, ``flags``); a what-if's other
# weights are a copy of it (``ClusterSettings.with_weights``).


# --- the factors ----------------------------------------------------------------------------------


def age_factor(accrue_time: int, now: int, max_age: int) -> float:
    # age = (now − accrue_time) / PriorityMaxAge, 1 once the wait reaches PriorityMaxAge
    # range [0, 1]; 0 while the job does not accrue (accrue_time 0) or accrue_time >= now
    if not accrue_time:
        return 0.0
    diff = (int(now) - int(accrue_time)) if now > accrue_time else 0
    diff &= 0xFFFFFFFF  # uint32_t diff
    if diff < max_age:
        return diff / max_age
    return 1.0  # also PriorityMaxAge=0: full age as soon as the job accrues


def jobsize_factor(job: Job, cluster: ClusterInfo, settings: ClusterSettings,
                   partition: PartitionInfo | None = None) -> float:
    # favor large: (min_nodes/nodes + cpus/cluster_cpus)/2; PriorityFavorSmall: ((nodes−min_nodes)/nodes +
    # (cluster_cpus−cpus)/cluster_cpus)/2; SMALL_RELATIVE_TO_TIME: max(cpus, min_nodes·cpus/node)/limit/cpus; [0, 1]
    nodes = cluster.node_count
    ccpus = cluster.cpu_count
    min_nodes = job.min_nodes
    cpu_cnt = job.cpus
    if "SMALL_RELATIVE_TO_TIME" in settings.flags:
        js = float(min_nodes) * float(ccpus) / float(nodes)  # job size in CPUs at average CPUs/node
        if cpu_cnt > js:
            js = float(cpu_cnt)
        if job.time_limit is not None:
            limit = job.time_limit  # minutes; UNLIMITED = 0xffffffff
        elif partition is not None:
            limit = INFINITE if partition.max_time is None else partition.max_time
        else:
            limit = 1
        if limit:
            js /= limit
        else:  # C: x/0 is inf (clamped to 1 below), 0/0 is NaN (left as 0 here)
            js = math.inf if js > 0 else 0.0
        js /= ccpus
        if settings.favor_small:
            js = 1.0 - js
    elif settings.favor_small:
        js = float((nodes - min_nodes) & 0xFFFFFFFF) / float(nodes)  # uint32_t arithmetic
        if cpu_cnt:
            js += float((ccpus - cpu_cnt) & 0xFFFFFFFF) / float(ccpus)
            js /= 2
    else:
        js = float(min_nodes) / float(nodes)
        if cpu_cnt:
            js += float(cpu_cnt) / float(ccpus)
            js /= 2
    return min(max(js, 0.0), 1.0)


def partition_factor(partition: PartitionInfo | None, cluster: ClusterInfo, settings: ClusterSettings) -> float:
    # PriorityJobFactor / the highest PriorityJobFactor of all partitions; NO_NORMAL_PART: PriorityJobFactor
    # range [0, 1] (NO_NORMAL_PART: [0, 65535]); 0 when the partition's PriorityJobFactor is 0
    if partition is None or not partition.priority_job_factor:
        return 0.0
    if "NO_NORMAL_PART" in settings.flags:
        return float(partition.priority_job_factor)
    top = cluster.part_max_priority
    return partition.priority_job_factor / top if top else 0.0


def qos_factor(qos: str | None, cluster: ClusterInfo, settings: ClusterSettings) -> float:
    # QOS Priority / the highest Priority of all QOS; NO_NORMAL_QOS: the QOS Priority itself
    # range [0, 1] (NO_NORMAL_QOS: [0, 2^32−1]); 0 for a QOS with priority 0 or an unknown QOS
    prio = cluster.qos_priority.get(qos or "", 0)
    if not prio:
        return 0.0
    if "NO_NORMAL_QOS" in settings.flags:
        return float(prio)
    top = cluster.qos_max_priority
    return prio / top if top else 0.0


def assoc_factor(assoc_priority: int, cluster: ClusterInfo, settings: ClusterSettings) -> float:
    # association Priority / the highest Priority of all associations; NO_NORMAL_ASSOC: the Priority itself
    # range [0, 1] (NO_NORMAL_ASSOC: [0, 2^32−1]); an unset Priority (INFINITE) counts as 0
    prio = 0 if assoc_priority in (None, INFINITE) else assoc_priority
    if "NO_NORMAL_ASSOC" in settings.flags:
        return float(prio)
    top = cluster.assoc_priority_max
    return prio / top if top else 0.0


def tres_factors(job: Job, partition: PartitionInfo | None, settings: ClusterSettings,
                 order: Sequence[str] = DEFAULT_TRES_ORDER) -> dict[str, float]:
    # per TRES t with a PriorityWeightTRES weight: job's t (allocated, else requested) / partition's total t
    # range [0, 1] each (NO_NORMAL_TRES: the raw count); 0 when the job or the partition has none of t
    out: dict[str, float] = {}
    for name in tres_names(settings, order):
        value = int(job.tres.get(name, 0) or 0)
        if "NO_NORMAL_TRES" in settings.flags:
            out[name] = float(value)
        elif value and partition is not None and partition.tres.get(name):
            out[name] = value / float(partition.tres[name])
        else:
            out[name] = 0.0
    return out


def tres_names(settings: ClusterSettings, order: Sequence[str] = DEFAULT_TRES_ORDER) -> list[str]:
    """The weighted TRES in slurmctld's TRES order (then any others by name)."""
    names = [t for t in order if t in settings.tres_weights]
    return names + sorted(t for t in settings.tres_weights if t not in names)


def site_points(site_factor: int) -> float:
    # site_factor as added to the priority: (NICE_OFFSET + site) − NICE_OFFSET, from scontrol/job_submit
    # range [−2147483645, 2147483645] (scontrol update SiteFactor=)
    return float((NICE_OFFSET + int(site_factor)) - NICE_OFFSET)


def nice_points(nice: int) -> float:
    # nice as subtracted from the priority: (NICE_OFFSET + nice) − NICE_OFFSET; --nice / scontrol update Nice=
    # range [−2147483645, 2147483645]; negative values need an operator
    return float((NICE_OFFSET + int(nice)) - NICE_OFFSET)


def clamp_priority(p: float) -> int:
    # max(P, 1) (0 means held), then (uint64_t) truncation, then 2^32 − 1 at most
    # range [1, 4294967295]
    if p < 1:
        p = 1.0
    v = math.trunc(p)
    return min(v, PRIORITY_MAX)


def wire(x: float) -> float:
    # packdouble()/unpackdouble(): x·10^6 sent as a double, divided by 10^6 on arrival (sprio's view)
    # range: x, up to one ulp
    return (x * FLOAT_MULT) / FLOAT_MULT


# --- one job ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Factors:
    """One job in one partition: each factor, its weighted value, and the priority.

    ``factors`` are the unweighted values (raw with NO_NORMAL_*), ``weighted`` the
    factor × weight as slurmctld holds it (doubles), ``tres``/``tres_weighted``
    likewise per TRES.  ``priority`` is slurmctld's integer; ``direct`` says an
    operator fixed it (then the factors are all 0, as slurmctld zeroes them).
    """

    job: Job
    partition: str
    factors: Mapping[str, float]
    weighted: Mapping[str, float]
    tres: Mapping[str, float]
    tres_weighted: Mapping[str, float]
    site: int
    nice: int
    priority: int
    direct: bool = False
    qos: str = ""  # the QOS this row competes in (the job's own, or one of several from 24.11)

    @property
    def total(self) -> float:
        """The unclamped weighted sum (slurmctld's double before max(·,1) and truncation)."""
        return _sum(self.weighted, self.tres_weighted.values(), self.site, self.nice)


def _sum(w: Mapping[str, float], tres: Iterable[float], site: int, nice: int, multi: bool = False) -> float:
    # the order of _get_priority_internal: age + assoc + fs + js + part + qos + tres + site − nice;
    # for a multi-partition job's priority_array: part + (age + assoc + fs + js + qos + tres + site − nice)
    t = 0.0
    for v in tres:
        t += v
    if multi:
        return w["partition"] + (w["age"] + w["assoc"] + w["fairshare"] + w["jobsize"] + w["qos"]
                                 + t + site_points(site) - nice_points(nice))
    p = w["age"] + w["assoc"] + w["fairshare"] + w["jobsize"] + w["partition"] + w["qos"]
    return p + t + site_points(site) - nice_points(nice)


def job_factors(job: Job, partition: str, fairshare: float, cluster: ClusterInfo,
                settings: ClusterSettings, now: int, multi: bool = False, qos: str | None = None) -> Factors:
    """All factors of ``job`` competing in ``partition`` (and ``qos``), evaluated at ``now``.

    ``fairshare`` is the fair-share factor of the job's association (the engine's
    ``Result.fairshare``; Slurm takes the fs parent's values for FairShare=parent).
    ``multi``: the job is in several partitions or QOS (its per-partition priority is
    summed in another order, see ``_sum``).  ``qos``: one of the job's several QOS (24.11+);
    None is the job's own (the first of :func:`ordered_qos`).
    """
    # P = Wage·age + Wassoc·assoc + Wfs·fs + Wjs·js + Wpart·part + Wqos·qos + Σ Wtres·tres + site − nice
    # range [1, 2^32 − 1] after clamp_priority; an operator-set priority is returned as is
    part = cluster.partitions.get(partition)
    own = (ordered_qos(job, cluster) or [job.qos])[0]
    qos = own if qos is None else qos
    if job.direct_set_prio and job.priority > 0:
        zero = dict.fromkeys(FACTOR_NAMES, 0.0)
        return Factors(job, partition, zero, dict(zero), {}, {}, 0, 0, int(job.priority), direct=True, qos=qos)
    # _priority_each_qos / _create_prio_list_qos: a QOS with Priority 0 (or no QOS weight) leaves the
    # factor of the job's own QOS in place
    counted = qos if cluster.qos_priority.get(qos) and settings.weights["qos"] else own
    f = {
        "age": age_factor(job.accrue_time, now, int(settings.max_age_seconds)),
        "assoc": assoc_factor(job.assoc_priority, cluster, settings),
        "fairshare": float(fairshare),
        "jobsize": jobsize_factor(job, cluster, settings, _job_partition(job, cluster)),
        "partition": partition_factor(part, cluster, settings),
        "qos": qos_factor(counted, cluster, settings),
    }
    weights = settings.weights
    w = {k: f[k] * float(weights[k]) for k in FACTOR_NAMES}
    tres = tres_factors(job, part, settings, cluster.tres_order)
    tres_weights = settings.tres_weights
    tres_w = {k: v * tres_weights[k] for k, v in tres.items()}
    site = int(job.site_factor or 0)  # None: the source could not read it
    prio = clamp_priority(_sum(w, tres_w.values(), site, job.nice, multi))
    return Factors(job, partition, f, w, tres, tres_w, site, int(job.nice), prio, qos=qos)


def _job_partition(job: Job, cluster: ClusterInfo) -> PartitionInfo | None:
    """job_ptr->part_ptr for the job-size time limit: the first (highest tier) partition."""
    for name in ordered_partitions(job, cluster):
        if name in cluster.partitions:
            return cluster.partitions[name]
    return None


def ordered_partitions(job: Job, cluster: ClusterInfo) -> list[str]:
    """A multi-partition job's partitions as slurmctld lists them: PriorityTier high first, then as given."""
    tiers = {p: (cluster.partitions[p].priority_tier if p in cluster.partitions else 0) for p in job.partitions}
    return sorted(job.partitions, key=lambda p: -tiers[p])  # stable, like list_sort's merge sort


def ordered_qos(job: Job, cluster: ClusterInfo) -> list[str]:
    """A job's QOS as slurmctld holds several (24.11+): Priority high first, duplicates dropped.
    Empty for a job with one QOS (slurmctld keeps no ``qos_list`` then)."""
    names = list(dict.fromkeys(job.qos_list))
    if len(names) < 2:
        return []
    return sorted(names, key=lambda q: -cluster.qos_priority.get(q, 0))  # ties: as requested


def job_priority(job: Job, fairshare: float, cluster: ClusterInfo, settings: ClusterSettings,
                 now: int) -> list[Factors]:
    """slurmctld's priority of ``job``: one :class:`Factors` per partition × QOS (one for most jobs).

    A multi-partition job gets a priority per partition (``priority_array``), and from 24.11 a
    job in several QOS one per partition × QOS (QOS inner); the first entry is the job's own.
    """
    # one job_factors() per partition (PriorityTier high first, then as given) and QOS (Priority high first)
    # range: a list of 1 to len(job.partitions) · len(job.qos_list) Factors
    parts = ordered_partitions(job, cluster)
    qoses: list[str | None] = list(ordered_qos(job, cluster)) or [None]
    multi = len(parts) > 1 or len(qoses) > 1
    return [job_factors(job, p, fairshare, cluster, settings, now, multi, q) for p in parts for q in qoses]


# what sprio shows of these priorities (its rows, rounding, columns and -w): priority_sprio.py
