"""The default lowering of a few ``.mlir`` programs through both backends.

A test module that subclasses :class:`BackendChecks` as ``TestBackends`` and
names its programs in ``PROGRAMS`` gets, for each of them: the CUDA C path
under the SIMT emulator and compiled by NVRTC for sm_90, and the Triton path
under Triton's CPU interpreter (against our interpreter) and compiled for
sm_90 in every form.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from test_lowering import assert_emulation_matches
from test_triton import (
    _check_compiled,
    _compile_all_forms,
    _failures,
    _interpret,
    needs_triton,
)

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering import nvrtc
from mirage_xdsl.lowering.cuda import generate_program


@functools.cache
def _interpreted(programs: tuple[Path, ...]) -> list[dict]:
    """Triton's interpreter on each of ``programs``, in one process (its
    start, importing torch and Triton, costs more than a small program's
    run): the rows of a class's programs, for each of its tests."""
    return _interpret("file", *map(str, programs))


def parse_program(path: Path):
    """The module in the ``.mlir`` file at ``path``."""
    return parse(make_context(), path.read_text(), str(path))


class BackendChecks:
    PROGRAMS: tuple[Path, ...] = ()
    """The ``.mlir`` files to check; each test runs once per file."""

    def pytest_generate_tests(self, metafunc) -> None:
        metafunc.parametrize("program", self.PROGRAMS, ids=lambda p: p.stem)

    def test_cuda_path_is_emulated_correctly(self, program: Path) -> None:
        assert_emulation_matches(parse_program(program))

    @pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed")
    def test_cuda_compiles_for_sm90(self, program: Path) -> None:
        compiled = nvrtc.compile_cuda(generate_program(parse_program(program)).source)
        assert compiled.cubin and ".target sm_90" in compiled.ptx

    @needs_triton
    def test_triton_kernels_match_the_interpreter(self, program: Path) -> None:
        rows = [r for r in _interpreted(self.PROGRAMS) if r["case"] == str(program)]
        assert rows and not _failures(rows)

    @needs_triton
    def test_triton_compiles_for_sm90(self, program: Path) -> None:
        for compiled in _compile_all_forms(parse_program(program)):
            _check_compiled(compiled)
