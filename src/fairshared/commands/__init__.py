"""Subcommands of the ``fairshared`` command line that live in their own modules."""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (timeouts, periods, dampening)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return v


def name_list(text: str) -> list[str]:
    """argparse type: ``a,b,c`` → ["a", "b", "c"] (-u, -A, -j, -p)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing")
    return names
