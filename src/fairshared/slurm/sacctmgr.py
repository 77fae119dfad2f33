"""``sacctmgr -nP show ...``: ``|``-separated rows, no header (``-n``), no trailing ``|`` (``-P``).  Pure.

The same in 22.05 to 26.05, but for the association's sibling-order field: ``lft`` before 23.11,
``lineage`` from then on (the caller asks for the one its release has).
"""

from __future__ import annotations

import math

from ..model import InputError


def parse_sacctmgr_assoc(text: str, fields: list[str], where: str = "sacctmgr show assoc") -> list[dict]:
    """``sacctmgr -nP show assoc format=<fields>``: one dict per line keyed by field name."""
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(fields):
            raise InputError(f"has {len(parts)} fields, expected {len(fields)}", f"{where}: line {lineno}")
        rows.append(dict(zip(fields, parts)))
    return rows



def parse_qos(text: str, where: str = "sacctmgr show qos") -> dict[str, int]:
    """``sacctmgr -nP show qos format=name,priority`` → {name: priority} (empty priority = 0)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 2:
            raise InputError(f"expected name|priority, got {line!r}", f"{where}: line {lineno}")
        try:
            out[parts[0]] = int(parts[1]) if parts[1].strip() else 0
        except ValueError:
            raise InputError(f"priority {parts[1]!r} is not an integer", f"{where}: line {lineno}") from None
    return out



def parse_qos_usage_factors(text: str, where: str = "sacctmgr show qos") -> dict[str, float]:
    """``sacctmgr -nP show qos format=name,usagefactor`` → {qos: factor}.

    Range: any finite number; an unreadable or infinite factor is 1.0, Slurm's default (a QOS row
    is never refused: usage is charged at factor 1 rather than not at all)."""
    out: dict[str, float] = {}
    for line in text.split("\n"):
        if not line.strip():
            continue
        name, _, value = line.partition("|")
        try:
            f = float(value)
        except ValueError:
            f = 1.0
        out[name.strip()] = f if math.isfinite(f) else 1.0
    return out
