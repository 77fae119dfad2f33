"""Slurm's special values, unit letters and time strings: the one table of each.  Pure, stdlib only.

* the sentinels of ``slurm.h`` (NO_VAL, INFINITE, NICE_OFFSET, NO_VAL64), unchanged 22.05 to 26.05;
* the unit letters K M G T P (``get_unit_type``, src/common/slurm_protocol_api.c) and each TRES's
  base unit (``slurmdb_get_tres_base_unit``, src/common/slurmdb_defs.c): what a suffix on a TRES
  count (:mod:`fairshared.slurm.tres`) or a TRES weight means;
* time strings: ``D-HH:MM:SS`` and its shorter forms (``time_str2secs``/``time_str2mins``,
  src/common/parse_time.c), squeue's TimeLimit, a partition's MaxTime, and epoch times printed
  under ``SLURM_TIME_FORMAT=%s``.
"""

from __future__ import annotations

import functools

from ..model import InputError

NICE_OFFSET = 0x80000000  # Slurm stores nice and site_factor as NICE_OFFSET + value
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
NO_VAL64 = 0xFFFFFFFFFFFFFFFE  # a uint64 count at or above it (NO_VAL64, INFINITE64) is no count

# --- unit letters -------------------------------------------------------------------------------

UNITS = "KMGTP"  # index + 1 = UNIT_KILO .. UNIT_PETA (slurm_protocol_api.h; UNIT_NONE = 0)
UNIT_NONE, UNIT_MEGA = 0, 2


def unit_power(letter: str) -> int | None:
    """A unit letter → its power of 1024 (K 1 .. P 5), case-insensitive as ``get_unit_type``
    (``toupper`` then a search of "KMGTP"); None for any other character."""
    i = UNITS.find(letter.upper()) if len(letter) == 1 else -1
    return i + 1 if i >= 0 else None


def tres_base_unit(name: str) -> int:
    """The unit a TRES is counted in: M (2) for ``mem`` and ``bb`` (MB), none (0) for all others,
    ``gres/*`` and ``license/*`` included (``slurmdb_get_tres_base_unit`` compares the type, the
    part before ``/``, case-insensitively; 22.05 to 26.05)."""
    return UNIT_MEGA if name.split("/", 1)[0].lower() in ("mem", "bb") else UNIT_NONE


# --- time strings -------------------------------------------------------------------------------


def time_str_seconds(text: str, *, default_unit: str = "minutes") -> int:
    """A Slurm time string in seconds: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``.

    A bare number is ``default_unit`` (slurm.conf's half-life and calc period are minutes).
    ``scontrol show config`` prints ``00:30:00`` or ``7-00:00:00``; ``NONE``/``(null)``/empty is 0.
    """
    s = text.strip()
    if not s or s.upper() in ("NONE", "(NULL)"):
        return 0
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        days = int(d)
        parts = [int(p) for p in s.split(":")] if s else [0]
        while len(parts) < 3:
            parts.append(0)  # D-HH, D-HH:MM
        h, m, sec = parts[:3]
        return ((days * 24 + h) * 60 + m) * 60 + sec
    parts = [int(p) for p in s.split(":")]
    if len(parts) == 1:
        return parts[0] * (60 if default_unit == "minutes" else 1)
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    h, m, sec = parts[:3]
    return (h * 60 + m) * 60 + sec


@functools.lru_cache(maxsize=1024)
def time_limit_minutes(text: str) -> int | None:
    """squeue's TimeLimit → minutes; INFINITE for UNLIMITED, None when unset (the partition's applies).

    Range: 0 .. INFINITE.  ``NOT_SET`` (NO_VAL: no ``--time`` given) and ``PARTITION_LIMIT`` are
    None, not 0: a job without a limit of its own takes its partition's MaxTime."""
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE"):
        return INFINITE
    if t in ("NOT_SET", "PARTITION_LIMIT", "N/A", ""):
        return None
    return time_str_seconds(text, default_unit="minutes") // 60


def max_time_minutes(text: str) -> int | None:
    """A partition's MaxTime (``scontrol show partition``) → minutes; None for UNLIMITED/INFINITE.

    Unlike :func:`time_limit_minutes` an unlimited MaxTime is None (PartitionInfo.max_time's
    meaning), and an empty value is unlimited too."""
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE", ""):
        return None
    return time_str_seconds(text, default_unit="minutes") // 60


def epoch_seconds(text: str) -> int:
    """A time printed under ``SLURM_TIME_FORMAT=%s`` → Unix seconds; 0 for the unset forms
    (``Unknown``, ``None``, ``N/A``, ``0``, empty).  Anything else means the format was not honoured:
    an :class:`InputError` rather than a guess at a local date."""
    t = text.strip()
    if t in ("", "Unknown", "None", "N/A", "0"):
        return 0
    if t.isdigit():
        return int(t)
    raise InputError(f"time {t!r} is not Unix seconds (was SLURM_TIME_FORMAT=%s honoured?)")
