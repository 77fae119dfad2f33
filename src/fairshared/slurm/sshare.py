"""``sshare -a -l -P`` (or ``-p``) from any Slurm >= 22.05: what the live source reads, and a dump
of it given as an input file.  Pure.

The header line decides the columns (sshare lets ``-o`` reorder them and
different releases print different sets).  Needed: Account, User, RawShares,
RawUsage; Partition is used when present.  The hierarchy comes from the
leading spaces of the Account column (one space per depth, as
``slurmdb_tree_name_get`` prints it); user rows name their account.

sshare does not print the order in which Slurm holds sibling associations, so
associations keep the dump's row order as their sibling order.  From 23.11 on
that *is* Slurm's order (both sort by ``lineage``); on 22.05 Slurm holds
siblings by nested-set ``lft`` while sshare prints users first and accounts by
name, so Fair Tree ranks of exact ties (typically two sibling accounts with no
usage at all) can differ.  A snapshot from the live source carries the real order.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ..model import Association, InputError, Shares, Snapshot, check_shares, USAGE_MAX, check_usage

REQUIRED = ("account", "user", "rawshares", "rawusage")


def looks_like_sshare_dump(text: str) -> bool:
    """Whether ``text`` starts with sshare's parsable header (``Account|User|...``)."""
    first = next((ln for ln in text.split("\n", 20)[:20] if ln.strip()), "")
    fields = [f.strip().lower() for f in first.split("|")]
    return "|" in first and "account" in fields and ("rawshares" in fields or "rawusage" in fields)


def parse_sshare(lines: Iterable[str], name: str = "<sshare dump>") -> Snapshot:
    """Parse sshare parsable output into a :class:`Snapshot` (see module docs)."""
    header: list[str] | None = None
    trailing = False
    col: dict[str, int] = {}
    associations: list[Association] = []
    # stack of (depth, account name) for the current path from root
    path: list[tuple[int, str]] = []
    accounts: set[str] = set()
    header_line = 0
    seen: dict[tuple, int] = {}
    reported: dict[tuple, float] = {}
    user_lines: list[tuple[int, str, str]] = []
    lineno = 0

    def where() -> str:  # the line being read, for an error
        return f"{name}:{lineno}"

    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if header is None:
            if "|" not in line and line.lstrip().startswith("{"):
                raise InputError(f"looks like a fairshared snapshot (JSON): use --snapshot {name}", where())
            if "|" not in line:
                raise InputError("expected sshare's '|'-separated header (run sshare with -P)", where())
            trailing = line.endswith("|")
            fields = line[:-1].split("|") if trailing else line.split("|")
            header = [f.strip().lower() for f in fields]
            col = {h: i for i, h in enumerate(header)}
            missing = [c for c in REQUIRED if c not in col]
            if missing:
                names = {"account": "Account", "user": "User", "rawshares": "RawShares",
                         "rawusage": "RawUsage"}
                raise InputError(
                    "header lacks the column(s) " + ", ".join(names[m] for m in missing)
                    + " (use sshare -a -l -P)",
                    where(),
                )
            header_line = lineno
            c_account, c_user = col["account"], col["user"]
            c_shares, c_usage = col["rawshares"], col["rawusage"]
            c_partition, c_fairshare = col.get("partition"), col.get("fairshare")
            continue
        if line.startswith("-") and set(line.strip()) <= {"-", " ", "|"}:
            continue  # a separator line from a non-parsable paste
        fields = (line[:-1] if trailing and line.endswith("|") else line).split("|")
        if len(fields) != len(header):
            raise InputError(f"has {len(fields)} fields, the header has {len(header)}", where())
        acct_field = fields[c_account]
        account = acct_field.strip()
        depth = len(acct_field) - len(acct_field.lstrip(" "))
        user = fields[c_user].strip() or None
        partition = fields[c_partition].strip() or None if c_partition is not None else None
        if not account:
            raise InputError("empty Account field", where())
        shares_text = fields[c_shares].strip()
        usage = _usage(fields[c_usage].strip() or "0", where)
        if user is None:
            # account row: its parent is the nearest shallower account on the path
            while path and path[-1][0] >= depth:
                path.pop()
            parent = path[-1][1] if path else None
            if parent is None and accounts:  # only the first account row (root) has none
                raise InputError(f"account {account!r} has no parent (is the Account column indented?)",
                                 where())
            if path and depth != path[-1][0] + 1:  # sshare indents a level by one space, never two
                raise InputError(f"account {account!r} is indented {depth} spaces, {depth - path[-1][0]} "
                                 f"more than {parent!r} above it: sshare indents each level by one space "
                                 "(was the dump edited?)", where())
            if account in accounts:
                raise InputError(f"duplicate account {account!r}", where())
            if parent is None:
                shares = 1 if not shares_text else _shares(shares_text, where)
            else:
                if not shares_text:
                    raise InputError(f"account {account!r} has no RawShares", where())
                shares = _shares(shares_text, where)
            accounts.add(account)
            path.append((depth, account))
            # the dump's row order is the sibling order (see module docstring)
            associations.append(Association(account, None, parent, shares, usage, None, len(associations)))
        else:
            user_lines.append((lineno, user, account))  # its account may come later (see below)
            if not shares_text:
                raise InputError(f"user {user!r} has no RawShares", where())
            shares = _shares(shares_text, where)
            key = (account, user, partition)
            if key in seen:
                raise InputError(f"duplicate association of user {user!r} in account {account!r} "
                                 f"(first at line {seen[key]})", where())
            seen[key] = lineno
            fs_text = fields[c_fairshare].strip() if c_fairshare is not None else ""
            if fs_text:
                try:
                    reported[key] = float(fs_text)
                except ValueError:
                    raise InputError(f"FairShare {fs_text!r} of user {user!r} is not a number",
                                     where()) from None
            associations.append(Association(account, user, account, shares, usage, partition,
                                            len(associations)))
    if header is None:
        raise InputError("is empty (expected the output of sshare -a -l -P)", name)
    # 22.05's sshare can print a FairShare=parent user's row before root or away from its account
    # (it walks the list slurmctld holds, and such a user sits with its fs-parent's children)
    for lineno, user, account in user_lines:
        if account not in accounts:
            raise InputError(f"user {user!r} names account {account!r}, which no row defines",
                             f"{name}:{lineno}")
    if not associations:
        raise InputError("has a header but no associations", f"{name}:{header_line}")
    return Snapshot(associations=associations, source=f"sshare dump {name}", sibling_order="input",
                    reported_fairshare=reported)


def _usage(text: str, where: Callable[[], str]) -> float:
    """check_usage(text, where()), without building ``where`` for a good value."""
    try:
        usage = float(text)
    except ValueError:
        usage = math.nan
    return usage if 0.0 <= usage <= USAGE_MAX else check_usage(text, where())


def _shares(text: str, where: Callable[[], str]) -> Shares:
    """check_shares(text, where()), likewise."""
    try:
        shares = int(text)
    except ValueError:
        shares = -1
    return shares if 0 <= shares < 0x7FFFFFFF else check_shares(text, where())


def parse_sshare_fairshare(text: str) -> dict[tuple[str, str | None, str | None], float]:
    """FairShare of every user row of ``sshare -a -l -P [-m]`` (or ``-p``), keyed (account, user,
    partition)."""
    if not text.strip():
        return {}
    return parse_sshare(io.StringIO(text), "sshare -a -l -P -m").reported_fairshare or {}  # never None here


# --- sshare by association ID: the cross-check of the association manager's tree -----------------

ID_FIELDS = ("ID", "User", "Partition", "RawShares", "FairShare")


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One row of ``sshare -a -P -o ID,User,Partition,RawShares,FairShare``."""

    user: str | None
    partition: str | None
    shares: int | str | None  # PARENT for "parent"; None where sshare prints none (root)
    fairshare: float | None  # user rows (Fair Tree prints none for accounts)


def parse_sshare_ids(text: str, name: str = "sshare -o " + ",".join(ID_FIELDS)) -> dict[int, ShareRow]:
    """``sshare -a -P -o ID,User,Partition,RawShares,FairShare`` → {association ID: row}.

    Without the Account column: sshare's client names each row's account by a linear search of the
    rows before it (``slurmdb_tree_name_get``), quadratic in the associations (58 s at 100,000 on
    22.05.8 and 25.11.7); without it the same read takes about a second.  The ID ties each row to
    the association manager's record of that association."""
    rows: dict[int, ShareRow] = {}
    lines = text.split("\n")
    lineno = 0
    while lineno < len(lines) and not lines[lineno].strip():
        lineno += 1
    if lineno == len(lines):
        raise InputError("is empty (expected a header line)", name)
    header = [f.strip().lower() for f in lines[lineno].rstrip("\r|").split("|")]
    if header != [f.lower() for f in ID_FIELDS]:
        raise InputError(f"header is {lines[lineno]!r}, expected {'|'.join(ID_FIELDS)!r}", f"{name}:{lineno + 1}")
    for lineno in range(lineno + 1, len(lines)):
        line = lines[lineno].rstrip("\r")
        if not line:
            continue
        fields = line.split("|")
        if len(fields) == 6 and fields[5] == "":
            fields.pop()  # -p's trailing "|"
        if len(fields) != 5:
            raise InputError(f"has {len(fields)} fields, expected 5", f"{name}:{lineno + 1}")
        ident, user, partition, shares_text, fs_text = fields

        def where() -> str:
            return f"{name}:{lineno + 1}"

        if not ident.isdecimal():
            raise InputError(f"ID {ident!r} is not a number", where())
        if int(ident) in rows:
            raise InputError(f"lists association ID {ident} twice", where())
        try:
            fairshare = float(fs_text) if fs_text else None
        except ValueError:
            raise InputError(f"FairShare {fs_text!r} is not a number", where()) from None
        rows[int(ident)] = ShareRow(user or None, partition or None,
                                    _shares(shares_text, where) if shares_text else None, fairshare)
    return rows
