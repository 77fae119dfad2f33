"""Sinks: where a cycle's results go (job updates, Prometheus metrics)."""
