"""Sources: where snapshots of a cluster come from (command-line tools, pyslurm, demo)."""
