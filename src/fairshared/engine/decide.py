"""Which fair-share algorithm runs, and with what parameters: one rule for the daemon and every command.

:func:`decide` takes the cluster's settings and what the user chose (the daemon's ``[algorithm]``
section, a command's ``--algorithm``/``--dampening``/``--priority-levels``/``--zero-shares-best``);
a choice left out (None) is the cluster's.  Pure.
"""

from __future__ import annotations

from ..model import InputError
from ..settings import ClusterSettings
from . import ALGORITHMS, Params

CLASSIC_FLAGS = frozenset({"NO_FAIR_TREE"})  # settings.flags: DEPTH_OBLIVIOUS sets it too, as in Slurm


def default_algorithm(settings: ClusterSettings) -> str:
    """Slurm's choice: Fair Tree unless PriorityFlags has NO_FAIR_TREE (or DEPTH_OBLIVIOUS)."""
    return "classic" if settings.flags & CLASSIC_FLAGS else "fair_tree"


def decide(settings: ClusterSettings, *, algorithm: str | None = None, dampening: float | None = None,
           priority_levels: int | None = None, zero_shares_best: bool = False) -> tuple[str, Params]:
    """(algorithm, Params): each choice given, else the cluster's.

    FairShareDampeningFactor is taken as Slurm takes it: 1 only when slurm.conf leaves it out
    (read_config.c: ``if (!s_p_get_uint16(&conf->fs_dampening_factor, ...)) conf->fs_dampening_factor
    = 1``), and 0 is a value slurm.conf may give (parse_value.c ``s_p_handle_uint16`` accepts it).
    Fair Tree and level-based never read it, so 0 changes nothing there; the classic formula divides
    by it (priority_multifactor.c ``_set_assoc_fs_factor``: ``pow(2.0, -((usage_efctv /
    shares_norm) / damp_factor))``), which is 0 for any usage and NaN for none, a factor slurmctld
    itself cannot use, and ``scontrol update FairShareDampeningFactor=0`` refuses it ("invalid
    dampening factor", scontrol.c).  So classic with 0 is an :class:`InputError`, never a silent 1.
    """
    name = algorithm or default_algorithm(settings)
    if name not in ALGORITHMS:
        raise InputError(f"unknown algorithm {name!r} (choose from {', '.join(ALGORITHMS)})")
    damp = settings.dampening if dampening is None else dampening
    if isinstance(damp, bool) or not isinstance(damp, (int, float)) or not damp >= 0:
        raise InputError(f"FairShareDampeningFactor must be a number >= 0, not {damp!r}")
    if name == "classic" and damp == 0:
        raise InputError("FairShareDampeningFactor=0: the classic fair-share factor divides usage by it "
                         "(slurmctld's is 0 for any usage and NaN for none); set it to 1 or more")
    levels = settings.priority_levels if priority_levels is None else priority_levels
    return name, Params(dampening=float(damp), priority_levels=levels, zero_shares_best=zero_shares_best)
