"""Render an engine :class:`~fairshared.engine.result.Result` like sshare does.

* ``table``    — ``sshare -l`` look: fixed widths, accounts indented one space per depth;
* ``parsable`` — ``sshare -l -P``: ``|``-separated with a header, readable back by
  ``--from-sshare``;
* ``json``     — ``{"algorithm": ..., "associations": [...]}`` in tree order.

Doubles print as C's ``%f`` (6 decimals, round-to-nearest on the binary double),
infinity as ``inf``, blanks as empty fields.  RawUsage prints truncated to an
integer, as sshare does.
"""

from __future__ import annotations

import json
import math
from typing import TextIO

from .engine.result import Result
from .model import PARENT

FORMATS = ("table", "parsable", "json")


def _f(x) -> str:
    """sshare's ``%f`` for doubles: blank for NaN (NO_VAL), ``inf`` for infinity."""
    v = float(x)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:f}"


def _json_num(x):
    v = float(x)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _shares_text(result: Result, i: int) -> str:
    t = result.tree
    if i == 0:
        return ""
    return PARENT if t.use_parent[i] else str(int(t.shares[i]))


def _columns(result: Result) -> list[str]:
    t = result.tree
    cols = ["Account", "User"]
    if any(p is not None for p in t.partition):
        cols.append("Partition")
    cols += ["RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage", "FairShare"]
    if result.algorithm == "fair_tree":
        cols.append("LevelFS")
    elif result.algorithm == "level_based":
        cols += ["LevelFS", "FSRaw"]
    return cols


def _row(result: Result, i: int, cols: list[str]) -> dict[str, str]:
    t = result.tree
    depth = int(t.depth[i])
    values = {
        "Account": " " * depth + t.account[i],
        "User": t.user[i] or "",
        "Partition": t.partition[i] or "",
        "RawShares": _shares_text(result, i),
        "NormShares": _f(result.norm_shares[i]),
        "RawUsage": str(int(math.floor(float(t.usage[i])))),
        "NormUsage": _f(result.norm_usage[i]),
        "EffectvUsage": _f(result.effective_usage[i]),
        "FairShare": _f(result.fairshare[i]),
        "LevelFS": _f(result.level_fs[i]),
        "FSRaw": "" if result.fs_raw is None else f"{int(result.fs_raw[i]):016X}",
    }
    return {c: values[c] for c in cols}


WIDTHS = {
    "Account": -20,
    "User": 10,
    "Partition": 12,
    "RawShares": 10,
    "NormShares": 11,
    "RawUsage": 11,
    "NormUsage": 11,
    "EffectvUsage": 13,
    "FairShare": 10,
    "LevelFS": 10,
    "FSRaw": 18,
}


COLUMNS = tuple(WIDTHS)  # sshare's names, what --format COL,COL chooses from


def parse_columns(text: str) -> list[str]:
    """``--format account,user,fairshare`` → sshare's column names (any case); ValueError names an unknown one."""
    by_lower = {c.lower(): c for c in COLUMNS}
    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c.lower() not in by_lower]
    if unknown or not names:
        raise ValueError(f"unknown column {', '.join(repr(c) for c in unknown) or repr(text)}: "
                         f"choose from {', '.join(COLUMNS)}")
    return list(dict.fromkeys(by_lower[c.lower()] for c in names))


def selected(result: Result, users: list[str] | None = None, accounts: list[str] | None = None) -> list[int]:
    """The associations ``sshare -u USERS -A ACCOUNTS`` lists, in tree order (``assoc_mgr_get_shares``):
    ``users`` drops the user associations of other users (account rows stay); ``accounts`` keeps the
    associations whose own account is listed (the account's row and its users, not sub-accounts).
    Both compare without regard to case, as Slurm's xstrcasecmp does."""
    t = result.tree
    u = {x.lower() for x in users} if users else None
    a = {x.lower() for x in accounts} if accounts else None
    return [i for i in range(t.n)
            if (u is None or (user := t.user[i]) is None or user.lower() in u)
            and (a is None or t.account[i].lower() in a)]


def write_parsable(result: Result, out: TextIO, rows=None, columns=None) -> None:
    cols = columns or _columns(result)
    out.write("|".join(cols) + "\n")
    for i in range(result.tree.n) if rows is None else rows:
        row = _row(result, i, cols)
        out.write("|".join(row[c] for c in cols) + "\n")


def write_table(result: Result, out: TextIO, rows=None, columns=None) -> None:
    cols = columns or _columns(result)

    def fmt(c: str, text: str) -> str:
        w = WIDTHS[c]
        return text.ljust(-w)[: max(-w, len(text))] if w < 0 else text.rjust(w)

    out.write(" ".join(fmt(c, c) for c in cols).rstrip() + "\n")
    out.write(" ".join("-" * abs(WIDTHS[c]) for c in cols) + "\n")
    for i in range(result.tree.n) if rows is None else rows:
        row = _row(result, i, cols)
        out.write(" ".join(fmt(c, row[c]) for c in cols).rstrip() + "\n")


def result_records(result: Result) -> list[dict]:
    """One dict per association in tree order with the JSON keys of ``compute``."""
    t = result.tree
    records = []
    for i in range(t.n):
        records.append(
            {
                "account": t.account[i],
                "user": t.user[i],
                "parent": t.parent_name(i),
                "partition": t.partition[i],
                "raw_shares": None if i == 0 else (PARENT if t.use_parent[i] else int(t.shares[i])),
                "norm_shares": _json_num(result.norm_shares[i]),
                "raw_usage": float(t.usage[i]),
                "norm_usage": _json_num(result.norm_usage[i]),
                "effective_usage": _json_num(result.effective_usage[i]),
                "level_fs": _json_num(result.level_fs[i]),
                "fairshare": _json_num(result.fairshare[i]),
                "fs_raw": None if result.fs_raw is None else int(result.fs_raw[i]),
            }
        )
    return records


def write_json(result: Result, out: TextIO, rows=None, columns=None) -> None:
    """All keys whatever ``columns`` say (the JSON keys are documented as a fixed set); ``rows`` filter."""
    records = result_records(result)
    if rows is not None:
        records = [records[i] for i in rows]
    json.dump({"algorithm": result.algorithm, "associations": records}, out, indent=1)
    out.write("\n")


def write(result: Result, fmt: str, out: TextIO, rows: list[int] | None = None,
          columns: list[str] | None = None) -> None:
    """``rows``: the associations to print (default all, tree order); ``columns``: sshare's names."""
    {"table": write_table, "parsable": write_parsable, "json": write_json}[fmt](result, out, rows, columns)


__all__ = ["COLUMNS", "FORMATS", "parse_columns", "result_records", "selected", "write"]
