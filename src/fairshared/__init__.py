"""fairshared: Slurm fair-share policy daemon."""

__version__ = "0.1.0"
