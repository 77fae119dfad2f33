"""``fairshared compare --plot FILE.png``: fair-share factor against usage/shares per algorithm.

Drawing only: the figures come from :func:`fairshared.commands.compare.compare_data`.  matplotlib is
an optional extra (``pip install 'fairshared[plot]'``), imported only here.
"""

from __future__ import annotations

import math
import os

from ..engine import build_tree
from ..model import InputError, Snapshot
from .common import engine_result


def plot_compare(pi: Snapshot, data: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib, an optional extra: pip install matplotlib "
                         "(or pip install 'fairshared[plot]')") from None
    _check_format(path)
    tree = build_tree(pi.associations)
    classic = engine_result(pi, "classic", tree)
    users = [i for i in range(tree.n) if tree.is_user[i]]
    x = []
    for i in users:
        s = float(classic.norm_shares[i])
        u = float(classic.norm_usage[i])
        x.append(u / s if s > 0 else math.inf)
    finite = [v for v in x if math.isfinite(v) and v > 0]
    floor = min(finite) / 2 if finite else 1e-3
    ceil = max(finite) * 2 if finite else 1.0
    xs = [min(max(v, floor), ceil) for v in x]
    algs = data["algorithms"]
    fig, axes = plt.subplots(1, len(algs), figsize=(4.5 * len(algs), 4), squeeze=False, sharey=True)
    for ax, a in zip(axes[0], algs):
        ys = [r["factors"][a] if r["factors"][a] is not None else 0.0 for r in data["users"]]
        ax.scatter(xs, ys, s=14)
        ax.set_xscale("log")
        ax.set_title(a)
        ax.set_xlabel("usage / shares (NormUsage / NormShares)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("fair-share factor")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise InputError(f"cannot write the plot: {exc.strerror}", path) from None
    finally:
        plt.close(fig)


def _check_format(path: str) -> None:
    """The file's extension must name a format matplotlib writes; checked before drawing (without one
    matplotlib would write FILE.png, not the file asked for)."""
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1][1:].lower()
    known = FigureCanvasBase.get_supported_filetypes()
    if ext not in known:
        what = f"cannot write a .{ext} file" if ext else "needs the file's extension to name the format"
        choices = ", ".join("." + k for k in sorted(known))
        raise InputError(f"--plot: matplotlib {what} (choose one of {choices})", path)
