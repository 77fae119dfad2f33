"""Shared fixtures.

The real-Slurm tests use the single-node dev cluster of deploy/dev-cluster through
tests/slurm_cluster.py: with CI=true they fail loudly when it cannot start;
elsewhere they skip with a one-line reason.
"""

from __future__ import annotations

import pytest
import slurm_cluster as sc


@pytest.fixture(scope="session")
def slurm():
    """The dev cluster, up in Fair Tree mode (tests may switch it with sc.ensure_cluster)."""
    return sc.cluster_or_skip("fair_tree")


DEMO_NOW = 1_795_521_600.0  # 2026-11-24 12:00:00 UTC: the moment the README's demo sessions show


@pytest.fixture(autouse=True)
def demo_now(monkeypatch):
    """The demo cluster's clock pinned at DEMO_NOW for every test: ``--demo`` without ``--at`` (and the
    daemon's DemoSource in-process) shows the same cluster in every run, whatever the wall clock says.
    A daemon run as a process keeps the real clock."""
    from fairshared.sources import demo

    monkeypatch.setattr(demo, "clock", lambda: DEMO_NOW)
    return DEMO_NOW
