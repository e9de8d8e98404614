"""``mirage-opt``: xDSL's optimizer driver with the mirage-xdsl dialects,
passes and targets, plus ``--superoptimize`` and one-line diagnostics."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import (
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from mirage_xdsl.context import DIALECTS
from mirage_xdsl.diagnostics import MirageError, first_line, parse, verify
from mirage_xdsl.passes import ALL_PASSES
from mirage_xdsl.targets import ALL_TARGETS

DESCRIPTION = """\
mirage-opt: the mirage-xdsl superoptimizer driver.

Reads MLIR text holding kernel/block/thread dialect programs (a file, or stdin),
verifies it, applies the passes given with -p, and prints the result with the
target given with -t (default: MLIR text).

  mirage-opt examples/gqa.mlir                     parse, verify, print
  mirage-opt --superoptimize examples/gqa.mlir     search for a faster µGraph
  mirage-opt -p PASS1,PASS2{opt=val} in.mlir       run a pass pipeline

Errors are reported as 'file:line:col: error: message' with exit code 1;
--debug shows the Python traceback instead.
"""


class MirageOptMain(xDSLOptMain):
    """The xDSL driver, with our registries and our error and output policy."""

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, load in DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, load)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, load in ALL_PASSES.items():
            self.register_pass(name, load)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets.update(ALL_TARGETS)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            module = parse(self.ctx, io.read(), self.get_input_name())
            verify(module)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        arg_parser.add_argument(
            "--superoptimize",
            action="store_true",
            help="shorthand for '-p superoptimize' (before any other -p passes)",
        )
        arg_parser.add_argument(
            "--debug",
            action="store_true",
            help="show Python tracebacks instead of one-line diagnostics",
        )

    def setup_pipeline(self) -> None:
        if self.args.superoptimize:
            rest = self.args.passes
            self.args.passes = "superoptimize" + (f",{rest}" if rest else "")
        super().setup_pipeline()

    def prepare_output(self) -> IO[str]:
        path = self.args.output_file
        if path is None:
            return sys.stdout
        source = self.args.input_file
        if source and os.path.exists(path) and os.path.samefile(source, path):
            raise MirageError(
                f"{path}: error: refusing to write the output over the input"
            )
        return AtomicOutput(path)


class AtomicOutput(tempfile.SpooledTemporaryFile):  # type: ignore[type-arg]
    """Collects the output and moves it into place only once it is complete."""

    def __init__(self, path: str):
        super().__init__(mode="w+")
        self.path = path

    def close(self) -> None:
        if not self.closed:
            self.seek(0)
            directory = os.path.dirname(os.path.abspath(self.path))
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mirage-opt-")
            with os.fdopen(fd, "w") as f:
                f.write(self.read())
            os.replace(tmp, self.path)
        super().close()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        MirageOptMain(description=DESCRIPTION, args=argv).run()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print("mirage-opt: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        print(one_line(e), file=sys.stderr)
        return 1
    return 0


def one_line(error: Exception) -> str:
    """The diagnostic line for any error that reaches the driver."""
    if isinstance(error, MirageError):
        return str(error)
    if isinstance(error, ParseError):
        return f"{error.span.get_location()}: error: {first_line(error.msg)}"
    if isinstance(error, (VerifyException, DiagnosticException, PassFailedException)):
        return f"error: {first_line(str(error))}"
    if isinstance(error, OSError):
        return f"error: {error.strerror or error}: {error.filename or ''}".rstrip(": ")
    return f"error: {first_line(str(error)) or type(error).__name__}"


if __name__ == "__main__":
    sys.exit(main())
