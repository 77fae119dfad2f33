"""Which fair-share algorithm runs, and with what parameters: one rule for the daemon and every command.

:func:`decide` takes the cluster's settings and what the user chose (the daemon's ``[algorithm]``
section, a command's ``--algorithm``/``--dampening``/``--priority-levels``/``--zero-shares-best``);
a choice left out (None) is the cluster's.  Pure.
"""

from __future__ import annotations

from ..model import InputError
from ..settings import ClusterSettings, dampening_factor
from . import ALGORITHMS, Params
from .classic import ZERO_DAMPENING

CLASSIC_FLAGS = frozenset({"NO_FAIR_TREE"})  # settings.flags: DEPTH_OBLIVIOUS sets it too, as in Slurm


def default_algorithm(settings: ClusterSettings) -> str:
    """Slurm's choice: Fair Tree unless PriorityFlags has NO_FAIR_TREE (or DEPTH_OBLIVIOUS)."""
    return "classic" if settings.flags & CLASSIC_FLAGS else "fair_tree"


def decide(settings: ClusterSettings, *, algorithm: str | None = None, dampening: float | None = None,
           priority_levels: int | None = None, zero_shares_best: bool = False) -> tuple[str, Params]:
    """(algorithm, Params): each choice given, else the cluster's.

    FairShareDampeningFactor (the cluster's, or the one chosen) is taken by Slurm's rule,
    :func:`fairshared.settings.dampening_factor`: a whole number from 0 to 65535, 1 only when
    slurm.conf leaves it out (read_config.c: ``if (!s_p_get_uint16(&conf->fs_dampening_factor, ...))
    conf->fs_dampening_factor = 1``).  Fair Tree and level-based never read it, so 0 changes nothing
    there; the classic formula divides by it (priority_multifactor.c ``_set_assoc_fs_factor``:
    ``pow(2.0, -((usage_efctv / shares_norm) / damp_factor))``), so classic with 0 is an
    :class:`InputError` (:data:`fairshared.engine.classic.ZERO_DAMPENING`), never a silent 1.
    """
    name = algorithm or default_algorithm(settings)
    if name not in ALGORITHMS:
        raise InputError(f"unknown algorithm {name!r} (choose from {', '.join(ALGORITHMS)})")
    what = "FairShareDampeningFactor" if dampening is None else "dampening"
    try:
        damp = dampening_factor(settings.dampening if dampening is None else dampening)
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None
    if name == "classic" and damp == 0:
        raise InputError(f"{what}=0: {ZERO_DAMPENING}")
    levels = settings.priority_levels if priority_levels is None else priority_levels
    return name, Params(dampening=float(damp), priority_levels=levels, zero_shares_best=zero_shares_best)
