"""The fair-share engine: pure functions from an association tree to sshare's columns.

No I/O and no Slurm imports here.  Each algorithm lives in its own module and
reads like its formula:

* :mod:`.classic`     — Slurm's PriorityFlags=NO_FAIR_TREE;
* :mod:`.fair_tree`   — Slurm's default since 19.05;
* :mod:`.level_based` — LEVEL_BASED from Slurm 14.11.0-pre3…pre5.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Association
from . import classic, fair_tree, level_based
from .result import Result
from .tree import Tree
from .tree_build import build_tree

ALGORITHMS = ("classic", "fair_tree", "level_based")


@dataclass(frozen=True)
class Params:
    """Algorithm parameters (Slurm's names in comments)."""

    dampening: float = 1.0  # FairShareDampeningFactor (classic)
    priority_levels: int | None = None  # PriorityLevels (level_based); None = depth of the tree
    zero_shares_best: bool = False  # level_based: 14.11's 0-share bug


def compute(tree: Tree | list[Association], algorithm: str = "fair_tree", params: Params = Params()) -> Result:
    """Run one algorithm over a tree (or a list of associations, built first)."""
    if not isinstance(tree, Tree):
        tree = build_tree(tree)
    if algorithm == "classic":
        return classic.compute(tree, dampening=params.dampening)
    if algorithm == "fair_tree":
        return fair_tree.compute(tree)
    if algorithm == "level_based":
        return level_based.compute(
            tree, priority_levels=params.priority_levels, zero_shares_best=params.zero_shares_best
        )
    raise ValueError(f"unknown algorithm {algorithm!r} (choose from {', '.join(ALGORITHMS)})")


__all__ = ["ALGORITHMS", "Params", "Result", "Tree", "build_tree", "compute"]
