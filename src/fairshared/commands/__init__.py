"""Subcommands of the ``fairshared`` command line that live in their own modules."""
