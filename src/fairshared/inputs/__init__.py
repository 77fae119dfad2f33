"""Readers for offline inputs: sshare dumps and fairshared snapshot files."""
