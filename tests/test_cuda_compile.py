"""Every example and hand-written µGraph compiles to sm_90 cubin within limits.

No GPU is needed: NVRTC compiles the generated CUDA C, and ptxas's report
(``-v``) gives each kernel's registers and spills. Skipped, with the reason,
where NVRTC is not installed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from activation_program import activation_module
from softmax_program import blocked_softmax_module, softmax_module

from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering import nvrtc
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.workloads import HANDWRITTEN

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.mlir"))
MAX_REGISTERS = H100.registers_per_thread
REGISTER_FILE = H100.registers_per_sm
SHARED_LIMIT = H100.shared_memory_per_block

needs_nvrtc = pytest.mark.skipif(
    not nvrtc.available(),
    reason="NVRTC not installed (pip install 'nvidia-cuda-nvrtc==13.0.*')",
)


def check_program(program) -> None:
    compiled = nvrtc.compile_cuda(program.source, verbose=True)
    warnings = [line for line in compiled.log.splitlines() if "warning" in line]
    assert not warnings, "\n".join(warnings)
    assert compiled.cubin and ".target sm_90" in compiled.ptx
    report = {r.kernel: r for r in nvrtc.resources(compiled.log)}
    for launch in program.launches:
        r = report[launch.name]
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        assert r.registers <= MAX_REGISTERS
        assert r.registers * threads <= REGISTER_FILE
        assert r.spill_stores == r.spill_loads == 0, f"{launch.name} spills"
        assert r.stack_bytes == 0, f"{launch.name} uses local memory"
        assert launch.shared_bytes + r.shared_bytes <= SHARED_LIMIT


@needs_nvrtc
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_compiles(path: Path) -> None:
    module = parse(make_context(), path.read_text(), str(path))
    check_program(generate_program(module))


@needs_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_compiles_at_batch_eight(name: str) -> None:
    """At batch 1 each hand-written µGraph is an example file
    (``tools/gen_examples.py``, kept in sync by ``test_examples.py``), which
    ``test_example_compiles`` compiles."""
    check_program(generate_program(HANDWRITTEN[name][1](8)))


def test_missing_nvrtc_is_one_line(monkeypatch) -> None:
    nvrtc.library.cache_clear()
    monkeypatch.setattr(nvrtc, "_candidates", lambda: ["/nonexistent/libnvrtc.so"])
    try:
        with pytest.raises(nvrtc.NvrtcError) as info:
            nvrtc.compile_cuda("")
        assert "\n" not in str(info.value)
        assert "nvidia-cuda-nvrtc" in str(info.value)
    finally:
        nvrtc.library.cache_clear()


CONSTANTS = Path(__file__).parent / "filecheck" / "inputs" / "constants.mlir"


@needs_nvrtc
def test_float_constants_compile() -> None:
    """mul_scalar, add_scalar (thread graph included) and rms_norm eps."""
    module = parse(make_context(), CONSTANTS.read_text(), str(CONSTANTS))
    program = generate_program(module)
    # the constant's fp32 value, printed exactly (repr of that float)
    assert f"{float(np.float32(0.10206207261596575))!r}f" in program.source
    check_program(program)


@needs_nvrtc
@pytest.mark.parametrize("fused", [False, True])
def test_activations_compile(fused: bool) -> None:
    """Every activation op at every level: tanhf, erff and fmaxf compile."""
    program = generate_program(activation_module(fused))
    assert all(f in program.source for f in ("tanhf(", "erff(", "fmaxf("))
    check_program(program)


@needs_nvrtc
@pytest.mark.parametrize("fused", [False, True])
def test_safe_softmax_compiles(fused: bool) -> None:
    """reduce_max as a kernel op and in a customized kernel: the row maximum's
    fmaxf and warp shuffles compile."""
    for module in (softmax_module(), blocked_softmax_module(fused=fused)):
        program = generate_program(module)
        assert "fmaxf(" in program.source
        check_program(program)
