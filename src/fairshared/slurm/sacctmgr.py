"""``sacctmgr -nP show ...``: ``|``-separated rows, no header (``-n``), no trailing ``|`` (``-P``).  Pure.

The same in 22.05 to 26.05, but for the association's sibling-order field: ``lft`` before 23.11,
``lineage`` from then on (the caller asks for the one its release has).
"""

from __future__ import annotations

import math

from ..model import InputError, Roles


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


# the columns of the own-Priority read (push mode assoc_priority): WOPLimits, so an association
# without a Priority of its own shows an empty one, not its parent's (as_mysql_assoc.c)
ASSOC_PRIORITY_FIELDS = ["id", "account", "user", "partition", "priority"]


def parse_assoc_priorities(text: str, where: str = "sacctmgr show assoc WOPLimits"
                           ) -> list[tuple[int, str, str | None, str | None, int | None]]:
    """``sacctmgr -nP show assoc WOPLimits format=id,account,user,partition,priority`` → one
    (id, account, user, partition, priority) a line (empty user, partition or priority: None).

    Range: priority in [0, 2^32 − 3]; anything else (a negative number, text) is an InputError naming
    the line: a value we cannot read is never taken for "unset"."""
    out = []
    for row in parse_sacctmgr_assoc(text, ASSOC_PRIORITY_FIELDS, where):
        line = f"{where}: association {row['id']!r}"
        if not (row["id"].isascii() and row["id"].isdigit()):
            raise InputError(f"id {row['id']!r} is not an association id", where)
        prio = row["priority"].strip()
        if prio and not (prio.isascii() and prio.isdigit() and int(prio) <= 0xFFFFFFFD):
            raise InputError(f"Priority {prio!r} is not an integer in 0..4294967293", line)
        out.append((int(row["id"]), row["account"], row["user"] or None, row["partition"] or None,
                    int(prio) if prio else None))
    return out


# ``sacctmgr -nP show user withcoord format=...``: the columns of :func:`parse_user_roles`
USER_ROLE_FIELDS = ["user", "adminlevel", "coordinators"]
OPERATOR_LEVELS = ("Operator", "Administrator")  # slurmdb_admin_level_str; "None" and "Not Set" are not


def parse_user_roles(text: str, where: str = "sacctmgr show user withcoord") -> Roles:
    """``sacctmgr -nP show user withcoord format=user,adminlevel,coordinators`` → :class:`Roles`.

    Coordinators print as ``acct1,acct2`` (sacctmgr_print_coord_list: sorted, direct and indirect
    alike), empty for none.  An admin level sacctmgr does not print is an InputError naming the line:
    a level we cannot read is never taken for "no privilege" silently."""
    operators, coords = set(), {}
    for row in parse_sacctmgr_assoc(text, USER_ROLE_FIELDS, where):
        user, level = row["user"], row["adminlevel"].strip()
        if level in OPERATOR_LEVELS:
            operators.add(user)
        elif level not in ("None", "Not Set", ""):
            raise InputError(f"admin level {level!r} of user {user!r} is not one of None, Operator, "
                             f"Administrator", where)
        accounts = frozenset(a for a in row["coordinators"].split(",") if a)
        if accounts:
            coords[user] = accounts
    return Roles(frozenset(operators), coords)
