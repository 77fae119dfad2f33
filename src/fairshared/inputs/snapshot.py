"""fairshared's own snapshot file: JSON with a versioned schema.

A snapshot records everything one computation read from a cluster, so that a
case can be replayed offline (``fairshared compute --snapshot FILE``)::

    {
      "schema": "fairshared-snapshot",
      "version": 1,
      "cluster": "mycluster",             # or null
      "source": "slurm-cli",              # who wrote it, free text
      "taken_at": 1763800000.0,           # Unix seconds, or null
      "sibling_order": "lft",             # what "order" holds: "lft", "lineage" or "input"
      "config": {"priority_flags": ["NO_FAIR_TREE"], "dampening": 1},   # optional
      "associations": [
        {"account": "root", "user": null, "parent": null, "partition": null,
         "shares": 1, "usage": 1234.5, "order": 1},
        {"account": "physics", "user": null, "parent": "root", "partition": null,
         "shares": "parent", "usage": null, "order": 4},
        {"account": "physics", "user": "alice", "parent": "physics", "partition": null,
         "shares": 10, "usage": 99.0, "order": 2}
      ]
    }

``shares`` is an integer or ``"parent"``; ``usage`` is raw usage (decayed
billable TRES-seconds), ``null`` on an account meaning "sum of its subtree".
``order`` (integer or string, optional) is Slurm's sibling order.

``config`` keys understood by ``compute``: ``priority_flags`` (list of Slurm's
flag names), ``dampening`` (FairShareDampeningFactor), ``priority_levels``.
"""

from __future__ import annotations

import json
import math
from typing import Any, TextIO

from ..model import Association, InputError, Snapshot, check_shares, check_usage

SCHEMA = "fairshared-snapshot"
VERSION = 1
SIBLING_ORDERS = ("lft", "lineage", "input")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def load_snapshot(fh: TextIO, name: str = "<snapshot>") -> Snapshot:
    try:
        doc = json.load(fh, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"is not valid JSON: {exc.msg}", f"{name}:{exc.lineno}") from None
    except ValueError as exc:  # NaN / Infinity
        raise InputError(f"is not valid JSON: {exc}", name) from None
    return snapshot_from_dict(doc, name)


def snapshot_from_dict(doc: Any, name: str = "<snapshot>") -> Snapshot:
    if not isinstance(doc, dict):
        raise InputError("is not a fairshared snapshot (expected a JSON object)", name)
    if doc.get("schema") != SCHEMA:
        raise InputError(f"is not a fairshared snapshot (schema is {doc.get('schema')!r}, expected {SCHEMA!r})", name)
    version = doc.get("version")
    if version != VERSION:
        raise InputError(f"has snapshot version {version!r}; this fairshared reads version {VERSION}", name)
    order_kind = doc.get("sibling_order", "input")
    if order_kind not in SIBLING_ORDERS:
        raise InputError(f"sibling_order {order_kind!r} is not one of {', '.join(SIBLING_ORDERS)}", name)
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise InputError("config is not an object", name)
    rows = doc.get("associations")
    if not isinstance(rows, list):
        raise InputError("has no 'associations' list", name)
    if not rows:
        raise InputError("the association tree is empty", name)
    out: list[Association] = []
    for i, row in enumerate(rows):
        where = f"{name}: associations[{i}]"
        if not isinstance(row, dict):
            raise InputError("is not an object", where)
        unknown = set(row) - {"account", "user", "parent", "partition", "shares", "usage", "order"}
        if unknown:
            raise InputError(f"has unknown key(s) {', '.join(sorted(unknown))}", where)
        account = row.get("account")
        if not isinstance(account, str) or not account:
            raise InputError(f"account {account!r} is not a non-empty string", where)
        user = row.get("user")
        if user is not None and (not isinstance(user, str) or not user):
            raise InputError(f"user {user!r} is not a non-empty string or null", where)
        parent = row.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise InputError(f"parent {parent!r} is not a string or null", where)
        partition = row.get("partition")
        if partition is not None and not isinstance(partition, str):
            raise InputError(f"partition {partition!r} is not a string or null", where)
        if user is not None and parent not in (None, account):
            raise InputError(f"user {user!r} has parent {parent!r}; a user's parent is its account {account!r}", where)
        label = f"{where} ({account}{'/' + user if user else ''})"
        shares = check_shares(row.get("shares", 1), label)
        usage = check_usage(row.get("usage"), label, allow_none=user is None)
        order = row.get("order")
        if order is not None and (isinstance(order, bool) or not isinstance(order, (int, str))):
            raise InputError(f"order {order!r} is not an integer or string", where)
        out.append(Association(account, user, parent if user is None else account, shares, usage, partition, order))
    taken = doc.get("taken_at")
    if taken is not None and (not isinstance(taken, (int, float)) or isinstance(taken, bool) or not math.isfinite(taken)):
        raise InputError(f"taken_at {taken!r} is not a number", name)
    return Snapshot(
        associations=out,
        cluster=doc.get("cluster"),
        source=doc.get("source"),
        taken_at=taken,
        sibling_order=order_kind,
        config=config,
    )


def snapshot_to_dict(snap: Snapshot) -> dict:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "cluster": snap.cluster,
        "source": snap.source,
        "taken_at": snap.taken_at,
        "sibling_order": snap.sibling_order,
        "config": snap.config,
        "associations": [
            {
                "account": a.account,
                "user": a.user,
                "parent": a.parent_account,
                "partition": a.partition,
                "shares": a.shares,
                "usage": a.usage,
                "order": a.order,
            }
            for a in snap.associations
        ],
    }


def dump_snapshot(snap: Snapshot, fh: TextIO) -> None:
    json.dump(snapshot_to_dict(snap), fh, indent=1)
    fh.write("\n")
