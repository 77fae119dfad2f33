"""TRES strings: counts (``cpu=4,mem=64G,gres/gpu=2``) and weights (``CPU=1.0,Mem=0.25G``).  Pure.

A count is what squeue, scontrol and sacct print of a job's or partition's trackable resources;
a weight is a slurm.conf setting, PriorityWeightTRES (the job priority) or a partition's
TRESBillingWeights (the billing that usage is charged in).  Both attach the unit letters of
:mod:`fairshared.slurm.units` to a number, but in opposite directions: a count *multiplies*
(``mem=64G`` is 65536 MB), a weight *divides* (``Mem=0.25G`` is 0.25 per GB, 0.25/1024 per MB).
TRES names are lower-cased here: Slurm matches them case-insensitively.
"""

from __future__ import annotations

import functools
import math
import re

from ..model import InputError
from .units import UNITS, tres_base_unit, unit_power

# --- counts -------------------------------------------------------------------------------------

# A count as Slurm prints one: digits, perhaps a fraction, perhaps a unit letter.  ``\d`` takes any
# Unicode decimal digit (float() reads them too): what squeue's reader always accepted.
_COUNT = re.compile(r"(\d+(?:\.\d+)?)([KMGTP]?)", re.IGNORECASE)


def tres_count(name: str, value: str) -> float | None:
    """One TRES count in its base unit (MB for ``mem`` and ``bb``, the count itself otherwise), or
    None when ``value`` is no count (also when it is too large for a double).

    Range: >= 0.  scontrol and squeue print memory converted exactly (``CONVERT_NUM_UNIT_EXACT``:
    ``64G`` = 65536), sacct with ``--noconvert`` in MB (``1000M``); ``mem=512K`` is 0.5 MB, which
    is meant: K is below memory's base unit.  A suffix on any other TRES scales by 1024 per step
    (``cpu=2K`` = 2048).  The same in 22.05 to 26.05."""
    m = _COUNT.fullmatch(value.strip())
    if not m:
        return None
    num = float(m.group(1))
    if not math.isfinite(num):
        return None
    base = tres_base_unit(name)
    unit = m.group(2)
    power = unit_power(unit) if unit else base
    if power is None:  # not reached: the pattern admits only K, M, G, T and P
        return None
    return num * 1024.0 ** (power - base)


def parse_tres(text: str | None) -> dict[str, int]:
    """A TRES string as squeue (``tres-alloc``) and ``scontrol show partition`` (``TRES=``) print it
    → {name: count}, counts rounded to integers (:func:`tres_count`).

    ``(null)``, ``N/A`` and empty are no TRES; an item without ``=`` is passed over (none of
    22.05 to 26.05 prints one); a count that is no count is an :class:`InputError` naming the item.
    A new dict each call; the parse is cached per string (a few hundred distinct strings among
    thousands of jobs)."""
    if not text or text in ("(null)", "N/A"):
        return {}
    return dict(_tres_counts(text))


@functools.lru_cache(maxsize=4096)
def _tres_counts(text: str) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}
    for item in text.split(","):
        if "=" not in item:
            continue
        name, value = item.split("=", 1)
        name = name.strip().lower()
        num = tres_count(name, value)
        if num is None:
            raise InputError(f"TRES {item!r} has no numeric count")
        out[name] = round(num)
    return tuple(out.items())


def parse_tres_exact(text: str) -> dict[str, float]:
    """sacct's AllocTRES (``billing=6,cpu=3,mem=1000M,node=1,gres/gpu=2``) → {name: count}, counts
    as floats (:func:`tres_count`; memory in MB).

    Stricter than :func:`parse_tres`, since a record read wrongly would charge usage wrongly:
    every item must be ``NAME=COUNT`` with a name starting with a letter; a ValueError (an
    :class:`InputError`) names the item, as negative, unparseable or out of range."""
    out: dict[str, float] = {}
    text = text.strip()
    if not text:
        return out
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name[:1].isalpha():
            raise InputError(f"unparseable TRES {item!r}")
        name = name.strip().lower()
        num = tres_count(name, value)
        if num is None:
            raise InputError(f"negative TRES {item!r}" if value.strip().startswith("-")
                             else f"unparseable TRES {item!r}")
        if not math.isfinite(num):
            raise InputError(f"TRES {item!r} is out of range")
        out[name] = num
    return out


# --- weights ------------------------------------------------------------------------------------

# the number strtod() reads at the start of a weight (decimal forms only; see tres_weight)
_WEIGHT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def tres_weight(name: str, value: str, where: str | None = None) -> float:
    """One TRES weight as slurmctld reads it (``_tres_weight_item``, src/common/slurm_protocol_api.c,
    the same in 23.11.11, 24.11.7, 25.11.7 and 26.05.3): ``strtod`` reads the number, then the
    first character after it, if any, must be a unit letter (``get_unit_type``: K M G T P, either
    case) and the rest of the value is ignored; the weight is divided by 1024^(unit − base unit)
    when the unit is above the TRES's base unit (``get_convert_unit_val``), else left as it is.

    Range: any finite number.  ``Mem=0.25G`` = 0.25/1024 per MB; ``CPU=1K`` = 1/1024 per CPU;
    ``Mem=3K`` = 3 per MB (K is below M: no conversion) and ``Mem=0.25GB`` = ``Mem=0.25G``, both
    meant.  What slurmctld refuses (a fatal error at start for PriorityWeightTRES, a rejected
    partition for TRESBillingWeights) is an :class:`InputError` naming the item: no number, or a
    character after it that is no unit letter (``2X``, ``1 G``).  Refused too, though strtod would
    read them: hexadecimal, ``inf`` and ``nan``, and a number beyond a double.  Not checked: that
    the TRES is configured (AccountingStorageTRES), which slurmctld also requires."""
    item = f"{name}={value}"
    text = value.strip()
    m = _WEIGHT.match(text)
    if not m:
        raise InputError(f"TRES weight {item!r}: {text!r} is not a number", where)
    weight = float(m.group(0))
    if not math.isfinite(weight):
        raise InputError(f"TRES weight {item!r}: {m.group(0)!r} is out of range", where)
    rest = text[m.end():]
    if rest:
        power = unit_power(rest[0])
        if power is None:
            raise InputError(f"TRES weight {item!r}: unit {rest[0]!r} is not one of "
                             f"{', '.join(UNITS)}", where)
        steps = power - tres_base_unit(name)
        if steps > 0:
            weight /= 1024.0**steps
    return weight


def parse_tres_weights(text: str | None, where: str | None = None) -> dict[str, float]:
    """PriorityWeightTRES or TRESBillingWeights (``CPU=1000,Mem=2000G,GRES/gpu=3000``) → {tres name:
    weight}, as ``slurm_get_tres_weight_array`` reads it: items split at ``,`` (``strtok``: an
    empty item is passed over), each ``NAME=WEIGHT`` (:func:`tres_weight`).  ``where`` names the
    setting in an error (``PriorityWeightTRES``, ``partition gpu TRESBillingWeights``).

    Unset (None, empty, ``(null)``, ``NONE``) is {}; quotes around the whole (slurm.conf's) are
    dropped.  An item without ``=``, or with an empty name or weight, is an :class:`InputError`, as
    slurmctld's "is an invalid TRES weight entry"."""
    out: dict[str, float] = {}
    if text is None:
        return out
    text = text.strip().strip('"')
    if not text or text.upper() in ("(NULL)", "NONE"):
        return out
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not name or not sep or not value.strip():
            raise InputError(f"{item!r} is an invalid TRES weight entry (expected NAME=WEIGHT)", where)
        out[name.lower()] = tres_weight(name, value, where)
    return out


def parse_billing_weights(text: str | None, where: str | None = None) -> dict[str, float]:
    """A partition's TRESBillingWeights (:func:`parse_tres_weights`), a negative weight refused.

    slurmctld takes one (strtod reads a sign), but usage charged in a negative billing would run
    backwards: fairshared refuses it rather than reproduce that."""
    out = parse_tres_weights(text, where)
    for name, weight in out.items():
        if weight < 0:
            raise InputError(f"TRES weight {name}={weight:g} is negative", where)
    return out
