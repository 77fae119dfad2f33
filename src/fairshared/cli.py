"""The ``fairshared`` command line."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

from . import __version__
from .commands import compare, compute, explain, recompute, run, sprio, standing, undo, usage, whatif_cmd
from .model import InputError
from .records import SourceError

EXIT_BAD_INPUT = 2
EXIT_SOURCE = 1
# each subcommand is a module of fairshared.commands with register(subparsers), listed by --help in this order
COMMANDS = (compute, run, recompute, undo, sprio, explain, compare, usage, whatif_cmd, standing)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairshared",
        description="Fair-share policy daemon for Slurm: computes classic, Fair Tree and LEVEL_BASED "
        "fair-share factors.",
    )
    parser.add_argument("--version", action="version", version=f"fairshared {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "save_snapshot", None) == "-":  # the snapshot is the output: the rest goes nowhere
            args.snapshot_stdout = sys.stdout
            with contextlib.redirect_stdout(io.StringIO()):
                return args.func(args)
        return args.func(args)
    except InputError as exc:
        print(f"fairshared: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SourceError as exc:
        print(f"fairshared: error: reading the cluster: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
