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
