"""``mirage-opt``: xDSL's optimizer driver with the mirage-xdsl dialects,
passes and targets, plus ``--superoptimize`` and one-line diagnostics."""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, get_pass_option_infos
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from mirage_xdsl.ir.context import DIALECTS
from mirage_xdsl.ir.diagnostics import (
    MirageError,
    first_line,
    parse,
    parse_error_line,
    verify,
)
from mirage_xdsl.registry import ALL_PASSES, ALL_TARGETS

DESCRIPTION = """\
mirage-opt: the mirage-xdsl superoptimizer driver.

Reads MLIR text holding kernel/block/thread dialect programs (a file, or stdin),
verifies it, applies the passes given with -p, and prints the result with the
target given with -t (default: MLIR text).

  mirage-opt examples/gqa.mlir                     parse, verify, print
  mirage-opt --superoptimize examples/gqa.mlir     search for a faster µGraph
  mirage-opt -p PASS1,PASS2{opt=val} in.mlir       run a pass pipeline

An input with no operations is an empty module. Errors are reported as
'file:line:col: error: message' with exit code 1 (130 when interrupted);
--debug shows the Python traceback instead. With -o, the output file is
written only once the whole run succeeded, and never over the input.
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
            # Blank lines in front keep line numbers of --split-input-file
            # chunks those of the whole file.
            text = b"\n" * self.chunk_offset + io.read()
            module = parse(self.ctx, text, self.get_input_name())
            verify(module)
            return module

        self.available_frontends["mlir"] = parse_mlir

    chunk_offset = 0
    """Line offset of the ``--split-input-file`` chunk being parsed."""

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self.chunk_offset = start_offset
        return super().parse_chunk(chunk, file_extension, start_offset)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        # Describing passes loads their modules: only do it when help is shown.
        base_help = arg_parser.format_help
        arg_parser.format_help = lambda: base_help() + self.registry_help()  # type: ignore[method-assign]
        arg_parser.add_argument(
            "--superoptimize",
            action="store_true",
            help="shorthand for '-p superoptimize' (before any other -p passes)",
        )
        arg_parser.add_argument(
            "--cluster",
            metavar="ADDRESS",
            default="",
            help="run the superoptimize search's tasks on the Dask scheduler at "
            "ADDRESS (tcp://host:8786) instead of local processes",
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
        check_pipeline(self.args.passes, self.available_passes)
        try:
            super().setup_pipeline()
        except (ValueError, TypeError, ArgSpecParseError) as e:
            raise MirageError(
                f"error: bad pass options in '-p {self.args.passes}': "
                f"{first_line(str(e))}"
            ) from None
        if self.args.cluster:
            self.pipeline = with_cluster(self.pipeline, self.args.cluster)

    def registry_help(self) -> str:
        """Our passes and targets, one line each (xDSL's help lists only names)."""
        lines = ["", "mirage-xdsl passes (-p NAME or -p NAME{option=value}):"]
        lines += [f"  {n:<24}{describe_pass(load)}" for n, load in ALL_PASSES.items()]
        if not ALL_PASSES:
            lines.append("  (none installed)")
        lines += ["", "mirage-xdsl targets (-t NAME):"]
        lines += [f"  {n:<24}{summary(load())}" for n, load in ALL_TARGETS.items()]
        if not ALL_TARGETS:
            lines.append("  (none installed)")
        return "\n".join(lines) + "\n"

    def prepare_output(self) -> IO[str]:
        path = self.args.output_file
        if path is None:
            return sys.stdout
        source = self.args.input_file
        if source and os.path.exists(path) and os.path.samefile(source, path):
            raise MirageError(
                f"{path}: error: refusing to write the output over the input"
            )
        self.output = AtomicOutput(path)
        return self.output

    def run(self) -> None:
        self.output: AtomicOutput | None = None
        super().run()
        if self.output is not None:
            self.output.commit()


def summary(obj: object) -> str:
    """First line of an object's docstring, RST literals shown as quotes."""
    return first_line(obj.__doc__ or "").replace("``", "'")


def describe_pass(load: Callable[[], type[ModulePass]]) -> str:
    """One line for --help: the pass's summary and its options."""
    cls = load()
    options = ", ".join(info.name for info in get_pass_option_infos(cls))
    return summary(cls) + (f" [options: {options}]" if options else "")


def with_cluster(pipeline: PassPipeline, address: str) -> PassPipeline:
    """``pipeline`` with each ``superoptimize`` pass not given a cluster of
    its own sending its tasks to ``address``."""
    if not any(p.name == "superoptimize" for p in pipeline.passes):
        raise MirageError(
            "error: --cluster needs the superoptimize pass "
            "(--superoptimize or -p superoptimize)"
        )
    passes = tuple(
        replace(p, cluster=address)  # type: ignore[type-var]
        if p.name == "superoptimize" and not getattr(p, "cluster", "")
        else p
        for p in pipeline.passes
    )
    return replace(pipeline, passes=passes)


PIPELINE_ERROR = re.compile(r"pass-pipeline:\d+:(\d+)")


def check_pipeline(
    spec: str, passes: dict[str, Callable[[], type[ModulePass]]]
) -> None:
    """Reject a bad ``-p`` pipeline with one line naming the pass or option."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:
        # A BaseException in xDSL, so it would escape ``except Exception``.
        text = str(e)
        column = PIPELINE_ERROR.search(text)
        where = f" at column {column.group(1)}" if column else ""
        why = text.strip().splitlines()[-1].strip()
        why = why[:1].lower() + why[1:]
        raise MirageError(
            f"error: bad pass pipeline '-p {spec}'{where}: {why}"
        ) from None
    for pass_spec in specs:
        if pass_spec.name not in passes:
            raise MirageError(
                f"error: unknown pass '{pass_spec.name}' "
                "(mirage-opt --help lists the passes)"
            )
        known = [info.name for info in get_pass_option_infos(passes[pass_spec.name]())]
        for option in pass_spec.parameters:
            if option.replace("-", "_") not in known:
                takes = ", ".join(known) if known else "none"
                raise MirageError(
                    f"error: pass '{pass_spec.name}' has no option '{option}' "
                    f"(options: {takes})"
                )


class AtomicOutput(io.StringIO):
    """Collects the output; :meth:`commit` moves it into place in one step.

    The driver closes its output stream whether or not the run succeeded, so
    closing keeps the text, and only a successful run commits it: a failed
    run leaves an existing file as it was.
    """

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def close(self) -> None:
        pass

    def commit(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mirage-opt-")
        except OSError as e:
            raise MirageError(
                f"{self.path}: error: cannot write the output: {e.strerror}"
            ) from None
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.getvalue())
            os.chmod(tmp, output_mode(self.path))
            os.replace(tmp, self.path)
        except OSError as e:
            os.unlink(tmp)
            raise MirageError(
                f"{self.path}: error: cannot write the output: {e.strerror}"
            ) from None


def output_mode(path: str) -> int:
    """Keep an existing file's permissions; new files get the umask's."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


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


def one_line(error: BaseException) -> str:
    """The diagnostic line for any error that reaches the driver."""
    if isinstance(error, MirageError):
        return str(error)
    if isinstance(error, ParseError):
        return parse_error_line(error)
    if isinstance(error, (VerifyException, DiagnosticException, PassFailedException)):
        return f"error: {first_line(str(error))}"
    if isinstance(error, OSError):
        name = error.filename or "mirage-opt"
        return f"{name}: error: {error.strerror or error}"
    if isinstance(error, MemoryError):
        return "error: out of memory"
    return f"error: {first_line(str(error)) or type(error).__name__}"


if __name__ == "__main__":
    sys.exit(main())
