"""One job's usage: its billable TRES, and what its run is worth at a time T in each model.

Pure numpy over columns of job records (one value per record), no I/O.  The two models are
described in ``usage.py``; ``usage_charge.py`` puts these figures together per association.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from .usage import UsagePolicy


# --- TRES billing ---------------------------------------------------------------------------

# TRESBillingWeights are parsed by fairshared.slurm.tres.parse_billing_weights (UsagePolicy).


def _is_node_tres(name: str) -> bool:
    # node TRES (billed by MAX with MAX_TRES): cpu, mem, node and every gres/*
    return name in ("cpu", "mem", "node") or name.startswith("gres/")


def billable_tres(alloc: Mapping[str, np.ndarray | float], weights: Mapping[str, float] | None,
                  max_tres: bool = False, max_tres_gres: bool = False):
    # no weights: b = cpu;  else b = Σ_global w·a + (MAX_TRES ? max_node w·a : Σ_node w·a)  (tres_weighted)
    # range: b >= 0; node = cpu, mem, node, gres/*; billing is never weighted; MAX_TRES_GRES sums gres/* aside
    cpu = alloc.get("cpu", 0.0)
    if not weights:
        return cpu * 1.0
    total = 0.0 * cpu
    node_max = 0.0 * cpu
    for name, w in weights.items():
        if name == "billing" or name not in alloc:
            continue
        v = alloc[name] * w
        by_max = (max_tres or max_tres_gres) and _is_node_tres(name)
        if by_max and not (max_tres_gres and name.startswith("gres/")):
            node_max = np.maximum(node_max, v)
        else:
            total = total + v
    return total + node_max


# --- the two models, per job ---------------------------------------------------------------


def slurm_job_usage(start, end, bill, t, policy: UsagePolicy, cutoff: float | None):
    # U = Σ_{R <= t_k <= t_n} Δk·d^Δk·d^(t_n − t_k)·b + [limits, R <= e <= t] Δe·d^Δe·d^(t_n − t_kE)·b, with
    # Δk = t_k − max(t_{k−1}, s), Δe = e − max(s, t_kE), t_kE = last iteration < e;  range: U >= 0
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    bill = np.asarray(bill, dtype=float)
    P = float(policy.calc_period)
    a = float(policy.iteration_anchor)
    lnd = policy.log_decay()
    n = math.floor((t - a) / P)
    started = start <= t
    running = np.isnan(end) | (end > t)
    k0 = np.ceil((start - a) / P)  # first iteration at or after the start
    with np.errstate(invalid="ignore"):
        kE = np.where(running, float(n), np.ceil((end - a) / P) - 1)  # last iteration charged as running
    kR = -np.inf if cutoff is None else math.ceil((cutoff - a) / P)  # first iteration not wiped by the reset
    hi = np.minimum(kE, n)

    dpow = policy.decay_over  # d^x

    # the first, partial chunk, charged at t_k0: Δ0 = t_k0 − s
    first = started & (k0 >= kR) & (k0 <= hi)
    d0 = a + k0 * P - start
    u = np.where(first, d0 * dpow(d0) * dpow((n - k0) * P), 0.0)
    # full chunks P·d^P at t_lo .. t_hi, decayed to t_n: P·d^P·d^((n−hi)P)·(1 − d^(mP))/(1 − d^P)
    lo = np.maximum(k0 + 1, kR)
    m = hi - lo + 1
    full = started & (m > 0)
    m = np.where(full, m, 0.0)
    geom = m if lnd == 0.0 else np.expm1(lnd * P * m) / math.expm1(lnd * P)
    u = u + np.where(full, P * dpow(P) * dpow((n - hi) * P) * geom, 0.0)
    # the job-end chunk, charged at the end only with AccountingStorageEnforce=limits
    if policy.enforce_limits:
        tE = a + kE * P
        with np.errstate(invalid="ignore"):
            de = np.where(running, 0.0, end - np.maximum(start, tE))
            fin = started & ~running & (de > 0)
            if cutoff is not None:
                fin &= end >= cutoff
        u = u + np.where(fin, de * dpow(de) * dpow((n - kE) * P), 0.0)
    return u * bill


def exact_job_usage(start, end, bill, t, half_life: float, cutoff: float | None):
    # U = b·∫_lo^hi 2^(−(t−x)/H)dx = b·(H/ln2)·2^(−(t−hi)/H)·(1 − 2^(−(hi−lo)/H)), lo=max(s,R), hi=min(e,t)
    # range: 0 <= U <= b·(hi − lo); H = 0 (no decay): U = b·(hi − lo)
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    lo = start if cutoff is None else np.maximum(start, cutoff)
    hi = np.where(np.isnan(end), t, np.minimum(end, t))
    span = np.maximum(hi - lo, 0.0)
    if half_life <= 0:
        return np.asarray(bill, dtype=float) * span
    lam = math.log(2.0) / half_life
    return np.asarray(bill, dtype=float) * np.exp(-lam * (t - hi)) * (-np.expm1(-lam * span)) / lam
