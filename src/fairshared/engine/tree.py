"""The association tree as flat arrays, in the order Slurm holds it.

Every association gets an index; index 0 is the root account and the indices
follow Slurm's association list order: a depth-first preorder in which the
siblings of each account are sorted by their ``order`` key (``lft`` in 22.05,
``lineage`` from 23.11) or kept in input order.  Because the order is a
preorder, every ancestor has a smaller index than its descendants, which lets
the algorithms work level by level with numpy instead of recursing per node.

Two parents matter (slurm-fairshare-internals §1):
* ``parent``: the direct parent; usage is charged up this chain;
* ``fs_parent``: the fair-share parent, the nearest ancestor whose shares are
  not ``Fairshare=parent``.  Slurm's ``children_list`` of X holds exactly the
  associations whose fs parent is X, so a ``Fairshare=parent`` account's
  children compete one level up, beside the account itself.

Built by :func:`~fairshared.engine.tree_build.build_tree` (``tree_build.py``; its one-association-at-a-time
check in ``tree_checked.py``); this module holds the layout and what the algorithms ask of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

NO_VAL = 4294967294  # Slurm's NO_VAL (0xfffffffe)


@dataclass(eq=False)
class Tree:
    """Structure-of-arrays association tree; see the module docstring.

    ``shares`` is 0 where ``use_parent`` is set.  ``usage`` is the raw usage as
    a long double (Slurm keeps ``usage_raw`` as a C long double).
    """

    parent: np.ndarray  # int64, -1 for root
    is_user: np.ndarray  # bool
    use_parent: np.ndarray  # bool
    shares: np.ndarray  # int64
    usage: np.ndarray  # longdouble
    account: list[str]
    user: list[str | None]
    partition: list[str | None]
    root_shares: int = 1

    @property
    def n(self) -> int:
        return len(self.parent)

    @cached_property
    def depth(self) -> np.ndarray:
        """Direct depth: 0 for root, 1 for its children, ..."""
        depth = np.zeros(self.n, dtype=np.int32)
        # parent index < own index: one pass in index order is enough, but that is
        # a Python loop; walk all nodes up together instead (depth is small).
        up = np.append(self.parent, -1)  # up[-1] == -1: a walk that reached the top stays there
        x = self.parent
        while (alive := x >= 0).any():
            depth += alive
            x = up[x]
        return depth

    @cached_property
    def levels(self) -> list[np.ndarray]:
        """Indices grouped by direct depth, shallowest first (root alone in level 0)."""
        depth = self.depth  # a handful of levels: one pass per level beats a stable sort
        return [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]

    @cached_property
    def fs_parent(self) -> np.ndarray:
        """Nearest ancestor that is not Fairshare=parent (root has -1)."""
        # climb while the ancestor reached is Fairshare=parent (chains of those are short)
        up = np.append(self.parent, -1).astype(np.int64)  # up[-1] == -1: root's parent stays -1
        via = np.append(self.use_parent, False)
        fsp = up[:-1].copy()
        while (m := via[fsp]).any():
            fsp = np.where(m, up[fsp], fsp)
        return fsp

    @cached_property
    def level_shares(self) -> np.ndarray:
        """Σ raw shares of the non-parent members of each association's children_list.

        Slurm's ``level_shares``: for child c of X, the shares of everybody competing
        with c under X (c included).  Root is in no children_list: NO_VAL.
        """
        fsp = self.fs_parent
        members = (fsp >= 0) & ~self.use_parent
        per_parent = np.bincount(fsp[members], weights=self.shares[members], minlength=self.n)
        out = per_parent[np.maximum(fsp, 0)].astype(np.int64)
        out[fsp < 0] = NO_VAL  # root (only root has no fs parent)
        return out

    @cached_property
    def user_count(self) -> int:
        """Fair Tree's N: every user association (root user, per-partition, 0-share, parent)."""
        return int(self.is_user.sum())

    def key(self, i: int) -> tuple[str, str | None, str | None]:
        return (self.account[i], self.user[i], self.partition[i])

    def parent_name(self, i: int) -> str | None:
        p = int(self.parent[i])
        return None if p < 0 else self.account[p]
