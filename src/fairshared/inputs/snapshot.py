"""fairshared's own snapshot file: JSON with a versioned schema.

A snapshot records everything one computation read from a cluster, so that a
case can be replayed offline (``fairshared compute --snapshot FILE``)::

    {
      "schema": "fairshared-snapshot",
      "version": 1,
      "cluster": "mycluster",             # or null
      "source": "slurm-cli",              # who wrote it, free text
      "taken_at": 1763800000.0,           # Unix seconds, or null
      "sibling_order": "lft",             # what "order" holds: "lft", "lineage", "name" or "input"
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
from ..settings import ClusterSettings, dampening_factor
from ..slurm.sshare import looks_like_sshare_dump
from .snapshot_schema import check_config, check_top_level

SCHEMA = "fairshared-snapshot"
VERSION = 1
SIBLING_ORDERS = ("lft", "lineage", "name", "input")  # engine.sibling_order says what each means


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def load_snapshot(fh: TextIO, name: str = "<snapshot>") -> Snapshot:
    return snapshot_from_dict(parse_document(fh.read(), name), name)


class _OutOfRange(ValueError):
    def __init__(self, literal: str):
        super().__init__(literal)
        self.literal = literal


def _finite_float(literal: str) -> float:
    """json's parse_float: ``1e400`` is not silently infinity."""
    v = float(literal)
    if math.isinf(v):
        raise _OutOfRange(literal)
    return v


def parse_document(text: str, name: str = "<snapshot>") -> Any:
    """The JSON document in ``text``; an sshare dump or bad JSON is an :class:`InputError` naming ``name``."""
    if looks_like_sshare_dump(text):
        raise InputError(f"looks like an sshare dump (`sshare -a -l -P`): use --from-sshare {name}", name)
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except _OutOfRange as exc:
        line = text.count("\n", 0, max(text.find(exc.literal), 0)) + 1
        shown = exc.literal if len(exc.literal) <= 40 else exc.literal[:37] + "..."
        raise InputError(f"the number {shown} is beyond a double's range (1.8e308)",
                         f"{name}:{line}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"is not valid JSON: {exc.msg}", f"{name}:{exc.lineno}") from None
    except ValueError as exc:  # NaN / Infinity, an integer of more than 4300 digits
        raise InputError(f"is not valid JSON: {exc}", name) from None
    except RecursionError:
        raise InputError("is not valid JSON: arrays or objects nested too deeply", name) from None


def _text(value: object) -> bool:
    """A string that is real Unicode text (JSON's escapes can spell lone surrogates, which cannot be printed)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_config(config: dict, name: str) -> None:
    """The keys ``compute`` reads: priority_flags, dampening, priority_levels (see the module docs)."""
    flags = config.get("priority_flags")
    if flags is not None and (not isinstance(flags, list) or not all(_text(f) for f in flags)):
        raise InputError(f"config.priority_flags {flags!r} is not a list of flag names", name)
    damp = config.get("dampening")
    if isinstance(damp, str):  # a JSON number, not the digits the rule takes from text
        raise InputError(f"config.dampening {damp!r} is not a number", name)
    if damp is not None:
        try:
            dampening_factor(damp)
        except ValueError as exc:
            raise InputError(f"config.dampening: {exc}", name) from None
    levels = config.get("priority_levels")
    if levels is not None and (isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= 16):
        raise InputError(f"config.priority_levels {levels!r} is not an integer in 1..16", name)


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
    check_top_level(doc, name)
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise InputError("config is not an object", name)
    _check_config(config, name)
    check_config(config, name)
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
            names = (k if k and k.isprintable() else repr(k) for k in sorted(unknown))  # one line, always
            raise InputError(f"has unknown key(s) {', '.join(names)}", where)
        account = row.get("account")
        if not _text(account) or not account:
            raise InputError(f"account {account!r} is not a non-empty string", where)
        user = row.get("user")
        if user is not None and (not _text(user) or not user):
            raise InputError(f"user {user!r} is not a non-empty string or null", where)
        parent = row.get("parent")
        if parent is not None and not _text(parent):
            raise InputError(f"parent {parent!r} is not a string or null", where)
        partition = row.get("partition")
        if partition is not None and not _text(partition):
            raise InputError(f"partition {partition!r} is not a string or null", where)
        if user is None and partition is not None:  # Slurm's account associations have none
            raise InputError(f"account {account!r} has partition {partition!r}; only user associations have one",
                             where)
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
    if taken is not None and (not isinstance(taken, (int, float)) or isinstance(taken, bool)
                              or not -math.inf < taken < math.inf):  # (isfinite overflows on a huge int)
        raise InputError(f"taken_at {taken!r} is not a number", name)
    return Snapshot(
        associations=out,
        cluster=doc.get("cluster"),
        source=doc.get("source"),
        taken_at=taken,
        sibling_order=order_kind,
        settings=_settings(config, name),
    )


def _settings(config: dict, name: str) -> ClusterSettings:
    try:
        return ClusterSettings.from_dict(config)
    except (TypeError, ValueError) as exc:
        raise InputError(f"config: {exc}", name) from None


def snapshot_to_dict(snap: Snapshot) -> dict:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "cluster": snap.cluster,
        "source": snap.source,
        "taken_at": snap.taken_at,
        "sibling_order": snap.sibling_order,
        "config": snap.settings.to_dict(),
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
