"""Subcommands of the ``fairshared`` command line that live in their own modules."""

from __future__ import annotations

import argparse
import math
import re

from ..settings import dampening_factor


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (timeouts, periods)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return v


def dampening(text: str) -> float:
    """argparse type for ``--dampening``: FairShareDampeningFactor by Slurm's rule
    (:func:`fairshared.settings.dampening_factor`: a whole number from 0 to 65535), as a float."""
    try:
        return float(dampening_factor(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def in_range(kind, lo, hi, what: str):
    """argparse type: a ``kind`` (float or int) in [lo, hi] (hi None: no upper bound); ``what`` is the
    rule the error states (``'-1': a count is 0 or more``)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a number' if kind is float else 'a whole number'}") \
                from None
        if not math.isfinite(v) or v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{text!r}: {what}")
        return v
    return parse


count = in_range(int, 0, None, "a count is 0 or more")


def name_list(text: str) -> list[str]:
    """argparse type: ``a,b,c`` → ["a", "b", "c"] (-u, -A, -j, -p)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing")
    return names


# sprio -j's job ids (unfmt_job_id_string, slurm_protocol_defs.c): JOB[_TASK] or JOB[+OFFSET], then
# an optional .STEP; sprio keeps JOB (+ OFFSET for a het job component).  "123_[1-3]" is refused.
_JOB_ID = re.compile(r"(?P<job>\d+)(?:_(?P<task>\d+)|\+(?P<het>\d+))?(?:\..+)?")


def job_id_list(text: str) -> list[int]:
    """argparse type: sprio's ``-j`` list → job ids.  ``123_4`` (an array task) selects job 123, as
    ``sprio -j 123_4`` does (sprio keeps only the array's job id); ``123+1`` selects 124."""
    ids = []
    for item in name_list(text):
        m = _JOB_ID.fullmatch(item)
        if not m or int(m["job"]) == 0:
            raise argparse.ArgumentTypeError(
                f"invalid job id {item!r} (as sprio: JOB, JOB_TASK or JOB+OFFSET)")
        ids.append(int(m["job"]) + int(m["het"] or 0))
    return ids
