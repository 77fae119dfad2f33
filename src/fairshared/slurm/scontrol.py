"""``scontrol -a -o show partition`` and ``show node``: one record a line, ``KEY=VALUE`` words.  Pure.

The same in 22.05 to 26.05 for the keys read here: PartitionName, PriorityJobFactor, PriorityTier,
MaxTime (:func:`fairshared.slurm.units.max_time_minutes`), TRES (:func:`fairshared.slurm.tres.parse_tres`)
and TRESBillingWeights of a partition; CPUEfctv, else CPUTot, of a node.
"""

from __future__ import annotations

import re

from ..model import InputError, PartitionInfo
from .tres import parse_tres
from .units import max_time_minutes


def key_values(line: str) -> dict[str, str]:
    """The ``KEY=VALUE`` words of a one-line record → {KEY: VALUE}, the first occurrence of a key
    kept.  A key starts with a letter after a blank (or the line's start) and runs to the first
    ``=``; the value runs to the next blank, so ``TRES=cpu=4,mem=1G`` is TRES → ``cpu=4,mem=1G``."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)", line):
        out.setdefault(m.group(1), m.group(2))
    return out


def parse_partitions(text: str, where: str = "scontrol show partition") -> dict[str, PartitionInfo]:
    """``scontrol -a -o show partition``: one PartitionInfo per line."""
    out: dict[str, PartitionInfo] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        kv = key_values(line)
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
                                  max_time=max_time_minutes(kv.get("MaxTime", "UNLIMITED")),
                                  tres=parse_tres(kv.get("TRES")))
    return out


def parse_nodes(text: str, where: str = "scontrol show node") -> tuple[int, int]:
    """``scontrol -a -o show node`` → (node count, Σ effective CPUs) = node_record_count, cluster_cpus."""
    nodes = cpus = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or not line.startswith("NodeName="):
            continue
        kv = key_values(line)
        value = kv.get("CPUEfctv", kv.get("CPUTot")) or ""  # neither: no count, refused below
        try:
            cpus += int(value)
        except ValueError:
            raise InputError("has no CPUEfctv= or CPUTot=", f"{where}: line {lineno}") from None
        nodes += 1
    return nodes, cpus


def partition_billing(text: str) -> dict[str, str]:
    """``scontrol show partition -o`` → {partition: TRESBillingWeights as written}, only the
    partitions that have some (the text is parsed by :func:`fairshared.slurm.tres.parse_billing_weights`
    where it is used)."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        fields = key_values(line)
        name = fields.get("PartitionName")
        w = fields.get("TRESBillingWeights")
        if name and w and w not in ("(null)", ""):
            out[name] = w
    return out
