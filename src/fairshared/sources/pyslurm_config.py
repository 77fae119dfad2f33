"""``pyslurm.slurmctld.Config`` read as the settings ``scontrol show config`` gives
(:func:`config_from_pyslurm`: the keys of :func:`fairshared.slurm.config.priority_config`).

Traps handled here (each is reproduced by ``tests/fake_pyslurm.py``; ``pyslurm:`` paths are inside
the pyslurm 25.11.2 sdist):

* ``Config.priority_calc_period`` / ``priority_decay_half_life`` / ``priority_max_age``
  are **seconds** (``u32_parse`` of slurm_ctl_conf_t fields, ``config.pyx:751-769``;
  the docstring at ``pyslurm:pyslurm/core/slurmctld/config.pxd:599-601`` wrongly says
  minutes) and 0 comes back as ``None`` (``u32_parse`` default ``zero_is_noval=True``).
* ``Config.accounting_storage_enforce`` is upper-cased (``config.pyx:248-256``) where
  ``scontrol show config`` prints lower case; ``Config.priority_weight_tres`` is
  ``cstr.to_dict`` — values are ``int`` only when all digits, else the raw string
  (``pyslurm:pyslurm/utils/cstr.pyx:144-167``); ``fair_share_dampening_factor`` is
  ``u16_parse`` (``config.pyx:467-468``), so 0/unset is ``None``.
"""

from __future__ import annotations

from ..model import InputError
from ..records import SourceError
from ..slurm.config import rate_limit
from ..slurm.tres import tres_weight


def _whole(value, name: str, what: str = "an integer") -> int:
    """A whole number from pyslurm (a weight, or u32 seconds when ``what`` says so): None (0 or unset)
    -> 0; anything else that is not an int (a bool included) is refused, naming the attribute."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(f"pyslurm.slurmctld.Config.{name} is {value!r}, expected {what}")
    return value


def config_from_pyslurm(cfg) -> dict:
    """``pyslurm.slurmctld.Config`` -> exactly the keys of :func:`fairshared.slurm.config.priority_config`."""
    tres: dict[str, float] = {}
    for k, v in (cfg.priority_weight_tres or {}).items():
        name = str(k).strip()
        try:  # v: int, or the raw string when not all digits ("0.25G"): read as scontrol's text is
            tres[name.lower()] = tres_weight(name, str(v), "pyslurm.slurmctld.Config.priority_weight_tres")
        except InputError as exc:
            raise SourceError(str(exc)) from None
    reset = cfg.priority_usage_reset_period  # None means NONE (config.pyx:776-794)
    plugin = cfg.priority_site_factor_plugin
    # u16_parse: None for 0 (slurmctld holds 1 when slurm.conf leaves it out, so None is a 0 slurm.conf
    # gave, as scontrol prints it) and "UNLIMITED" for INFINITE16, 65535; ClusterSettings applies Slurm's rule
    dampening = {None: 0, "UNLIMITED": 0xFFFF}.get(cfg.fair_share_dampening_factor, cfg.fair_share_dampening_factor)
    return {
        "cluster_name": cfg.cluster_name,
        "slurm_version": cfg.version,  # config.pyx:1190-1191
        "priority_type": cfg.priority_type or "priority/basic",
        "priority_flags": [str(f).strip().upper() for f in (cfg.priority_flags or []) if str(f).strip()],
        "dampening": dampening,
        "half_life_seconds": _whole(cfg.priority_decay_half_life, "priority_decay_half_life", "seconds"),
        "calc_period_seconds": _whole(cfg.priority_calc_period, "priority_calc_period", "seconds"),
        "usage_reset_period": str(reset).upper() if reset else "NONE",
        "max_age_seconds": _whole(cfg.priority_max_age, "priority_max_age", "seconds"),
        "favor_small": bool(cfg.priority_favor_small),
        "weight_age": _whole(cfg.priority_weight_age, "priority_weight_age"),
        "weight_assoc": _whole(cfg.priority_weight_assoc, "priority_weight_assoc"),
        "weight_fairshare": _whole(cfg.priority_weight_fair_share, "priority_weight_fair_share"),
        "weight_jobsize": _whole(cfg.priority_weight_job_size, "priority_weight_job_size"),
        "weight_partition": _whole(cfg.priority_weight_partition, "priority_weight_partition"),
        "weight_qos": _whole(cfg.priority_weight_qos, "priority_weight_qos"),
        "weight_tres": tres,
        # pyslurm upper-cases these; scontrol (and slurm.config) give lower case
        "accounting_storage_enforce": [str(e).strip().lower() for e in (cfg.accounting_storage_enforce or [])
                                       if str(e).strip()],
        "site_factor_plugin": plugin or None,
        "rate_limit": rate_limit(_params_text(getattr(cfg, "slurmctld_parameters", None))),
        "slurm_user_uid": uid if isinstance(uid := getattr(cfg, "slurm_user_id", None), int) else None,
        # a list of lower-case names, [] for none (pyslurm's Config.private_data, private_data_string)
        "private_data": [str(x).strip().lower() for x in (getattr(cfg, "private_data", None) or [])
                         if str(x).strip() and str(x).strip().lower() != "none"],
    }


def _params_text(params) -> str:
    """``Config.slurmctld_parameters`` back to slurm.conf's text: a list of items in some pyslurm
    releases, a dict (``{"rl_enable": True, "rl_refill_rate": "10"}``) in others."""
    if isinstance(params, dict):
        return ",".join(k if v is True else f"{k}={v}" for k, v in params.items())
    if isinstance(params, (list, tuple)):
        return ",".join(str(x) for x in params)
    return str(params or "")
