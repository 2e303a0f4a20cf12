"""The ``seglog`` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


def _dump(args: argparse.Namespace) -> int:
    from format.dump import dump_file

    corrupt = False
    for path in args.files:
        result = dump_file(path, print_data=args.print_data_log)
        for line in result.lines:
            print(line)
        corrupt |= result.corrupt
    return 1 if corrupt else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seglog", description="A Kafka-compatible commit log that Spark reads.")
    commands = parser.add_subparsers(dest="command", required=True)
    dump = commands.add_parser("dump", help="print the batches of .log files and the entries of index files")
    dump.add_argument("files", nargs="+", help=".log, .index, .timeindex or .txnindex files")
    dump.add_argument("--print-data-log", action="store_true", help="print every record, not only batch headers")
    dump.set_defaults(run=_dump)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:
        return 0
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"seglog {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
