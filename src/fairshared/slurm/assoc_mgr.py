"""``scontrol show assoc_mgr flags=assoc``: slurmctld's associations, usage and sibling order.  Pure.

A record is a ``ClusterName=`` line and the indented lines after it, ``KEY=VALUE`` words.  Release
differences: the sibling order is ``Lft=`` (nested-set left, 22.05) or ``Lineage=`` (23.11 on:
:data:`fairshared.slurm.versions.LINEAGE`); raw usage is printed to two decimals in every release.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..model import PARENT, InputError, Shares, check_shares, check_usage
from .scontrol import key_values
from .units import INFINITE


@dataclass(frozen=True, slots=True)
class AssocRecord:
    """One association as slurmctld's association manager holds it."""

    id: int
    account: str
    user: str | None
    partition: str | None
    parent_id: int | None
    shares: Shares
    usage: float
    order: int | str | None


def _name_uid(value: str) -> tuple[str, int] | None:
    r"""``name(uid)`` → (name, uid), else None: the regex ``^(.*)\((\d+)\)$`` on a word (no line
    break), without one (``\d`` and :meth:`str.isdecimal` are the same characters)."""
    if value.endswith(")"):
        i = value.rfind("(")
        if i >= 0 and value[i + 1:-1].isdecimal():
            return value[:i], int(value[i + 1:-1])
    return None


# A record: its ``ClusterName=`` line and the indented lines after it.  A line that is not indented
# (a heading such as "QOS Records", an empty line) ends it; split on the newline before each such line.
_RECORDS = re.compile(r"\n(?![ \t])")
# the keys a record is read from: as slurmctld prints a record, all of them are in its first
# _HEAD_WORDS words (ClusterName Account UserName Partition Priority ID, SharesRaw/..., UsageRaw/...,
# ParentAccount Lft|Lineage DefAssoc)
_ASSOC_KEYS = frozenset(("ID", "Account", "UserName", "Partition", "SharesRaw/Norm/Level/Factor",
                         "UsageRaw/Norm/Efctv", "ParentAccount", "Lineage", "Lft"))
_HEAD_WORDS = 11


def _words(words: list[str]) -> dict[str, str]:
    r"""``KEY=VALUE`` words → {KEY: VALUE}, the first occurrence of a key kept.

    The key is the word up to its first ``=`` after the first character and the value the rest of
    the word: what ``re.finditer(r"(\S+?)=(\S*)", line)`` finds, word by word (a match cannot start
    inside a word whose first character is not followed by a ``=``, nor span whitespace, which
    :meth:`str.split` and ``\s`` define alike).  So ``a==b`` is a → ``=b``, ``=x=y`` is ``=x`` → y,
    ``k=`` is k → "", and ``=x`` or a word without ``=`` is nothing."""
    # reversed: in a dict display the last occurrence wins
    out = {k: v for k, eq, v in [w.partition("=") for w in reversed(words)] if eq}
    if "" in out:  # a word starting with "=": its key runs to the next "=" (rare; done word by word)
        out = {}
        for w in words:
            i = w.find("=", 1)
            if i > 0 and w[:i] not in out:
                out[w[:i]] = w[i + 1:]
    return out


def _record_fields(record: str) -> dict[str, str]:
    """The ``KEY=VALUE`` words of one record (:func:`_words`).  Only the keys of _ASSOC_KEYS are read,
    so its first _HEAD_WORDS words are enough, unless one of those keys is missing there and the rest
    holds ``KEY=`` somewhere (as a word whose key is KEY must): then all its words are read."""
    words = record.split(None, _HEAD_WORDS)
    if len(words) <= _HEAD_WORDS:
        return _words(words)
    rest = words.pop()
    fields = _words(words)
    if any(k + "=" in rest for k in _ASSOC_KEYS.difference(fields)):
        return _words(record.split())
    return fields


def parse_assoc_mgr(text: str, where: str = "scontrol show assoc_mgr") -> list[AssocRecord]:
    """``scontrol show assoc_mgr flags=assoc``: one record per ``ClusterName=`` block.

    Reads Account, UserName (``name(uid)``), Partition, ID, the first field of
    ``SharesRaw/Norm/Level/Factor`` (raw shares; ``parent`` or 2147483647 for
    Fairshare=parent), the first of ``UsageRaw/Norm/Efctv`` (raw usage, printed
    to two decimals where sshare truncates to an integer), ``ParentAccount=name(id)``
    and the sibling order ``Lft=`` (22.05) or ``Lineage=`` (23.11+) when present.
    A block is its ``ClusterName=`` line and the indented lines after it, read as
    ``KEY=VALUE`` words (:func:`_words`; the first occurrence of a key wins).
    """
    records: list[AssocRecord] = []
    lineno = 1
    for record in _RECORDS.split(text):
        if record.startswith("ClusterName="):
            records.append(_assoc_record(_record_fields(record), where, lineno))
        lineno += record.count("\n") + 1
    return records


def _assoc_record(block: dict[str, str], where: str, start: int) -> AssocRecord:
    def at() -> str:  # only for an error
        return f"{where}: record at line {start}"

    def label() -> str:
        return f"{at()} ({account}{'/' + user if user else ''})"

    try:
        ident = int(block["ID"])
    except (KeyError, ValueError):
        raise InputError("has no numeric ID=", at()) from None
    account = block.get("Account", "")
    if not account:
        raise InputError("has no Account=", at())
    user_uid = _name_uid(block.get("UserName", ""))
    user = (user_uid[0] if user_uid else block.get("UserName", "")) or None
    part = block.get("Partition", "") or None
    shares_field = block.get("SharesRaw/Norm/Level/Factor")
    usage_field = block.get("UsageRaw/Norm/Efctv")
    if shares_field is None or usage_field is None:
        raise InputError("lacks SharesRaw/... or UsageRaw/...", at())
    raw_shares = shares_field.partition("/")[0]
    shares: Shares
    if raw_shares.lower() == "parent" or raw_shares == "2147483647":
        shares = PARENT
    else:
        try:  # what check_shares accepts, without building its label
            shares = int(raw_shares)
            valid = 0 <= shares < 0x7FFFFFFF
        except ValueError:
            valid = False
        if not valid:
            shares = check_shares(raw_shares, label())
    raw_usage = usage_field.partition("/")[0]
    try:  # likewise for check_usage
        usage = float(raw_usage)
        valid = 0.0 <= usage < math.inf
    except ValueError:
        valid = False
    if not valid:
        usage = check_usage(raw_usage, label())
    parent = _name_uid(block.get("ParentAccount", ""))
    order: int | str | None = None
    if block.get("Lineage"):
        order = block["Lineage"]
    elif block.get("Lft", "").isdigit():
        order = int(block["Lft"])
    return AssocRecord(ident, account, user, part, parent[1] if parent else None, shares, usage, order)


def parse_assoc_priorities(text: str) -> dict[tuple[str, str | None, str | None], int]:
    """``scontrol show assoc_mgr flags=assoc`` → {(account, user, partition): Priority}.

    slurmctld prints each association's effective Priority (inherited from its
    parents by slurmdbd; unset = 0, as ``_set_assoc_norm_priority`` makes it).
    """
    out: dict[tuple[str, str | None, str | None], int] = {}
    for line in text.split("\n"):
        if not line.startswith("ClusterName="):
            continue
        kv = key_values(line)
        acct = kv.get("Account")
        if not acct:
            continue
        user = re.sub(r"\(\d+\)$", "", kv.get("UserName", "")) or None
        try:
            prio = int(kv.get("Priority", "0") or 0)
        except ValueError:
            prio = 0
        out[(acct, user, kv.get("Partition") or None)] = 0 if prio == INFINITE else prio
    return out
