"""The GPU runtime without a GPU: NVRTC, the cubin cache, argument checks,
error naming, and whole runs against a fake driver that executes numpy
versions of the self-test kernels on host memory."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from fake_driver import CUresult, FakeDriver, view

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import BufferSpec, GpuProgram, KernelLaunch
from mirage_xdsl.runtime import CompiledProgram, CompileError, compile_cuda
from mirage_xdsl.runtime.arguments import array_kind, check_numpy, check_torch
from mirage_xdsl.runtime.cache import CubinCache, cache_key, default_cache_dir
from mirage_xdsl.runtime.compiled import target_arch
from mirage_xdsl.runtime.driver import (
    Device,
    Driver,
    GpuError,
    GpuUnavailable,
    import_driver,
)
from mirage_xdsl.runtime.executable import validate_program
from mirage_xdsl.runtime.selftest import ROW_SUM_COLS, SELFTESTS
from mirage_xdsl.workloads import WORKLOADS

# --- NVRTC --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SELFTESTS))
def test_selftest_kernels_compile_to_cubin(name: str) -> None:
    program = SELFTESTS[name].program
    cubin, ptx, _log = compile_cuda(program.source, "sm_90")
    assert cubin[:4] == b"\x7fELF"
    for launch in program.launches:
        assert f".entry {launch.name}(" in ptx


def test_compile_error_is_one_line_with_full_log() -> None:
    source = 'extern "C" __global__ void k(float* x) { x[0] = undefined_name; }'
    with pytest.raises(CompileError) as info:
        compile_cuda(source, "sm_90")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("error: CUDA compilation failed:")
    assert "undefined_name" in message
    assert "1 error detected" in info.value.log


# --- cache --------------------------------------------------------------------


def test_cache_key_depends_on_every_input() -> None:
    base = cache_key("src", "sm_90", ("-O3",), "nvrtc-13.0")
    assert base == cache_key("src", "sm_90", ("-O3",), "nvrtc-13.0")
    variants = [
        cache_key("src2", "sm_90", ("-O3",), "nvrtc-13.0"),
        cache_key("src", "sm_90a", ("-O3",), "nvrtc-13.0"),
        cache_key("src", "sm_90", (), "nvrtc-13.0"),
        cache_key("src", "sm_90", ("-O3",), "nvrtc-12.8"),
        cache_key("src", "sm_90", ("-O", "3"), "nvrtc-13.0"),
    ]
    assert len({base, *variants}) == 1 + len(variants)


def test_cache_compiles_once_across_instances(tmp_path) -> None:
    calls = []

    def compiler(source, arch, options):
        calls.append(source)
        return b"\x7fELF" + source.encode(), "", ""

    first = CubinCache(tmp_path)
    assert first.compile(compiler, "v1", "A", "sm_90") == b"\x7fELFA"
    assert first.compile(compiler, "v1", "A", "sm_90") == b"\x7fELFA"
    second = CubinCache(tmp_path)  # a new process: only the disk is shared
    assert second.compile(compiler, "v1", "A", "sm_90") == b"\x7fELFA"
    assert second.compile(compiler, "v2", "A", "sm_90") == b"\x7fELFA"
    assert calls == ["A", "A"]
    assert (first.misses, first.hits, second.misses, second.hits) == (1, 1, 1, 1)
    assert len(list(tmp_path.glob("*.cubin"))) == 2


def test_cache_in_memory_only(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", "off")
    assert default_cache_dir() is None
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "cuda"
    cache = CubinCache(None)
    cache.compile(lambda s, a, o: (b"x", "", ""), "v", "A", "sm_90")
    assert cache.get(cache_key("A", "sm_90", (), "v")) == b"x"


# --- driver errors --------------------------------------------------------------


def test_error_names_come_from_the_driver() -> None:
    driver = Driver(FakeDriver())
    image = np.frombuffer(b"not a cubin", dtype=np.uint8).copy()
    with pytest.raises(GpuError) as info:
        driver.call("cuModuleLoadData", image.ctypes.data, what="gqa")
    assert str(info.value) == (
        "error: cuModuleLoadData failed (gqa): CUDA_ERROR_INVALID_IMAGE "
        "(device kernel image is invalid)"
    )


def test_unknown_error_codes_are_reported_by_number() -> None:
    fake = FakeDriver()
    fake.cuGetErrorName = lambda code: (CUresult.CUDA_ERROR_INVALID_VALUE, None)
    assert Driver(fake).error_name(999) == "CUDA error 999"


def test_no_device_is_reported_as_unavailable() -> None:
    with pytest.raises(GpuUnavailable, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        Device(0, Driver(FakeDriver(init_result=CUresult.CUDA_ERROR_NO_DEVICE)))
    with pytest.raises(GpuUnavailable, match="no CUDA GPU found"):
        Device(0, Driver(FakeDriver(devices=0)))
    with pytest.raises(GpuError, match=r"no CUDA device 3 \(found 1\)"):
        Device(3, Driver(FakeDriver()))


def test_missing_libcuda_is_reported_as_unavailable() -> None:
    def fail(flags):
        raise RuntimeError("Failed to dlopen libcuda.so.1")

    fake = FakeDriver()
    fake.cuInit = fail
    with pytest.raises(GpuUnavailable, match="no CUDA driver: Failed to dlopen"):
        Device(0, Driver(fake))


def test_missing_cuda_python_is_reported(monkeypatch) -> None:
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(GpuUnavailable, match=r"cuda-python is not installed"):
        import_driver()


def test_device_info() -> None:
    info = Device(0, Driver(FakeDriver())).info
    assert (info.name, info.arch, info.multiprocessors) == ("Fake H100", "sm_90", 132)


def test_target_arch_keeps_arch_specific_suffix() -> None:
    assert target_arch("sm_90", "sm_90") == "sm_90"
    assert target_arch("sm_90a", "sm_90") == "sm_90a"
    assert target_arch("sm_90", "sm_100") == "sm_100"


# --- whole runs on the fake driver -------------------------------------------------


def _f16(ptr: int, n: int) -> np.ndarray:
    return view(ptr, np.float16, n)


def _f32(ptr: int, n: int) -> np.ndarray:
    return view(ptr, np.float32, n)


def _threads(grid, block) -> int:
    return grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]


def _mul(grid, block, p) -> None:
    n = _threads(grid, block)
    _f32(p[2], n)[:] = _f16(p[0], n).astype(np.float32) * _f16(p[1], n)


def _add(grid, block, p) -> None:
    n = _threads(grid, block)
    _f16(p[2], n)[:] = _f32(p[0], n) + _f16(p[1], n).astype(np.float32)


def _row_sum(grid, block, p) -> None:
    rows, cols = grid[0], ROW_SUM_COLS
    x = _f16(p[0], rows * cols).astype(np.float32).reshape(rows, cols)
    _f32(p[1], rows)[:] = x.sum(axis=1)


def _scale_bf16(grid, block, p) -> None:
    n = _threads(grid, block)
    bits = view(p[0], np.uint16, n).astype(np.uint32) << 16
    _f32(p[1], n)[:] = 2 * bits.view(np.float32)


FAKE_KERNELS = {
    "mul_f16": (3, _mul),
    "add_f16": (3, _add),
    "row_sum": (2, _row_sum),
    "scale_bf16": (2, _scale_bf16),
}


def fake_device(**kwargs) -> tuple[FakeDriver, Device]:
    fake = FakeDriver(kernels=dict(FAKE_KERNELS), **kwargs)
    return fake, Device(0, Driver(fake))


def _inputs(program: GpuProgram, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for spec in program.inputs():
        x = rng.uniform(-1, 1, spec.shape)
        if spec.dtype == "bf16":
            ml_dtypes = pytest.importorskip("ml_dtypes")
            out.append(x.astype(ml_dtypes.bfloat16))
        else:
            out.append(x.astype({"f16": np.float16, "f32": np.float32}[spec.dtype]))
    return out


@pytest.mark.parametrize("name", sorted(SELFTESTS))
def test_selftests_run_on_fake_driver(name: str, tmp_path) -> None:
    test = SELFTESTS[name]
    fake, dev = fake_device()
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(tmp_path))
    xs = _inputs(test.program, seed=1)
    outs = compiled.run(*xs)
    refs = test.reference(*[x.astype(np.float32) for x in xs])
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    assert [x.name for x in fake.launches] == [x.name for x in test.program.launches]
    compiled.close()
    assert fake.allocations == {}


def test_launches_share_the_intermediate_and_follow_buffers() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    compiled.run(*_inputs(test.program, 0))
    compiled.run(*_inputs(test.program, 1))
    mul, add, mul2, _ = fake.launches
    assert mul.pointers[2] == add.pointers[0] == mul2.pointers[2]  # t
    assert mul.pointers[0] == add.pointers[1]  # a, twice
    assert mul.grid == (16, 1, 1) and mul.block == (256, 1, 1)


def _waiting(program: GpuProgram) -> GpuProgram:
    """``program`` with every kernel declared to wait for its predecessor."""
    return replace(
        program, launches=tuple(replace(x, waits=True) for x in program.launches)
    )


def test_kernels_after_the_first_launch_programmatically_when_they_wait(
    monkeypatch,
) -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    compiled = CompiledProgram(
        _waiting(test.program), device=dev, cache=CubinCache(None)
    )
    xs = _inputs(test.program, 0)
    outs = compiled.run(*xs)
    refs = test.reference(*[x.astype(np.float32) for x in xs])
    np.testing.assert_allclose(outs[0].astype(np.float32), refs[0], rtol=2e-3)
    first, second = fake.launches
    assert (first.programmatic, second.programmatic) == (False, True)
    assert second.grid == (16, 1, 1) and second.block == (256, 1, 1)
    assert second.pointers[0] == first.pointers[2]  # the intermediate t
    compiled.close()

    # kernels that do not wait, or the switch off: every launch is plain
    for program, switch in ((test.program, "1"), (_waiting(test.program), "0")):
        monkeypatch.setenv("MIRAGE_PROGRAMMATIC_LAUNCH", switch)
        fake, dev = fake_device()
        compiled = CompiledProgram(program, device=dev, cache=CubinCache(None))
        compiled.run(*xs)
        assert [x.programmatic for x in fake.launches] == [False, False]
        compiled.close()


def test_cuda_c_kernels_are_launched_plainly() -> None:
    """Programmatic launch made 6 of 10 CUDA C programs slower on the H100,
    so their kernels neither wait for their predecessor nor declare it."""
    from mirage_xdsl.lowering.cuda import generate_program

    program = generate_program(WORKLOADS["rmsnorm_linear"].module(16, 16))
    assert len(program.launches) == 2 and not any(x.waits for x in program.launches)
    assert "griddepcontrol" not in program.source


def test_large_dynamic_shared_memory_raises_the_limit() -> None:
    test = SELFTESTS["dynamic_shared_64k"]
    fake, dev = fake_device()
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    compiled.run(*_inputs(test.program, 0))
    key = ("row_sum", "MAX_DYNAMIC_SHARED_SIZE_BYTES")
    assert fake.func_attributes[key] == ROW_SUM_COLS * 4 > 48 * 1024


def test_unwritten_outputs_read_as_nan() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    fake.kernels["add_f16"] = (3, lambda grid, block, p: None)
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    (out,) = compiled.run(*_inputs(test.program, 0))
    assert np.isnan(out).all()


def test_poisoned_intermediates_read_as_nan() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    fake.kernels["mul_f16"] = (3, lambda grid, block, p: None)
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    compiled.poison_intermediates()
    (out,) = compiled.run(*_inputs(test.program, 0))
    assert np.isnan(out).all()


def test_asynchronous_fault_is_named_at_synchronisation() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()

    def fault(grid, block, p):
        fake.pending_error = CUresult.CUDA_ERROR_ILLEGAL_ADDRESS

    fake.kernels["mul_f16"] = (3, fault)
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    with pytest.raises(GpuError) as info:
        compiled.run(*_inputs(test.program, 0))
    assert str(info.value) == (
        "error: cuCtxSynchronize failed (running 'fma_two_kernels'): "
        "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
    )


def test_launch_checks_against_compiled_kernel() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    _, dev = fake_device(max_threads=128)
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    with pytest.raises(GpuError, match="256 threads per block.*at most 128"):
        compiled.load()
    _, dev = fake_device(static_shared=200 * 1024)
    compiled = CompiledProgram(
        SELFTESTS["dynamic_shared_64k"].program, device=dev, cache=CubinCache(None)
    )
    with pytest.raises(GpuError, match="204800 B static \\+ 65536 B dynamic"):
        compiled.load()


def test_kernel_missing_from_cubin_is_named() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    del fake.kernels["add_f16"]
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    with pytest.raises(GpuError, match="add_f16.*CUDA_ERROR_NOT_FOUND.*extern"):
        compiled.load()


# --- static program checks --------------------------------------------------------


def _program(**changes) -> GpuProgram:
    return replace(SELFTESTS["two_kernels_with_intermediate"].program, **changes)


def test_validate_program_accepts_the_selftests() -> None:
    for test in SELFTESTS.values():
        validate_program(test.program)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {
                "launches": (
                    KernelLaunch("mul_f16", (1, 1, 1), (32, 1, 1), 0, ("a", "zz", "t")),
                )
            },
            "argument 'zz' names no buffer",
        ),
        (
            {"launches": (KernelLaunch("nope", (1, 1, 1), (32, 1, 1), 0, ()),)},
            "no such kernel in the source",
        ),
        (
            {"launches": (KernelLaunch("mul_f16", (1, 1, 1), (64, 32, 1), 0, ()),)},
            "2048 threads per block",
        ),
        (
            {"launches": (KernelLaunch("mul_f16", (0, 1, 1), (32, 1, 1), 0, ()),)},
            "grid (0, 1, 1)",
        ),
        (
            {
                "buffers": (
                    BufferSpec("a", (4,), "f16", "input", 1),
                    BufferSpec("out", (4,), "f16", "output", 0),
                )
            },
            "input indices are [1], expected 0..0",
        ),
        (
            {
                "buffers": (
                    BufferSpec("a", (4,), "f16", "input", 0),
                    BufferSpec("a", (4,), "f16", "output", 0),
                )
            },
            "buffer 'a' is declared twice",
        ),
        (
            {"buffers": (BufferSpec("a", (4,), "f64", "output", 0),)},
            "unsupported dtype 'f64'",
        ),
        ({"buffers": (BufferSpec("a", (4,), "f16", "input", 0),)}, "no output"),
    ],
)
def test_validate_program_rejects(changes, message) -> None:
    with pytest.raises(MirageError) as info:
        validate_program(_program(**changes))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# --- argument checks ------------------------------------------------------------------


SPEC = BufferSpec("K", (2, 64), "f16", "input", 1)


def test_numpy_arguments_are_checked() -> None:
    good = np.zeros((2, 64), np.float16)
    assert check_numpy(good, SPEC, "argument", 1, "gqa") is good
    with pytest.raises(
        MirageError,
        match=r"argument 1 \('K'\) of 'gqa': expected shape \[2, 64\], got \[2, 32\]",
    ):
        check_numpy(np.zeros((2, 32), np.float16), SPEC, "argument", 1, "gqa")
    with pytest.raises(MirageError, match="expected dtype float16, got float32"):
        check_numpy(np.zeros((2, 64), np.float32), SPEC, "argument", 1, "gqa")
    strided = np.zeros((2, 128), np.float16)[:, ::2]
    assert check_numpy(strided, SPEC, "argument", 1, "gqa").flags.c_contiguous


class FakeTensor:
    """Enough of a torch tensor for the argument checks."""

    def __init__(
        self,
        shape=(2, 64),
        dtype="torch.float16",
        device="cuda",
        index=0,
        contiguous=True,
        ptr=4096,
    ):
        self.shape = shape
        self.dtype = dtype
        self.device = SimpleNamespace(type=device, index=index)
        self._contiguous = contiguous
        self._ptr = ptr

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._ptr


FakeTensor.__module__ = "torch.fake"


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (FakeTensor(device="cpu"), "tensor is on '"),
        (FakeTensor(index=1), "tensor is on cuda:1, program runs on cuda:0"),
        (
            FakeTensor(dtype="torch.bfloat16"),
            "expected dtype float16, got torch.bfloat16",
        ),
        (FakeTensor(shape=(64, 2)), "expected shape [2, 64], got [64, 2]"),
        (FakeTensor(contiguous=False), "tensor is not contiguous"),
        (FakeTensor(ptr=4098), "not 16-byte aligned"),
    ],
)
def test_torch_arguments_are_checked(tensor, message) -> None:
    with pytest.raises(MirageError) as info:
        check_torch(tensor, SPEC, "argument", 1, "gqa", 0)
    assert message in str(info.value)
    assert str(info.value).startswith("error: argument 1 ('K') of 'gqa': ")


def test_torch_argument_pointer() -> None:
    assert check_torch(FakeTensor(), SPEC, "argument", 1, "gqa", 0) == 4096


def test_array_kinds() -> None:
    a = np.zeros(2)
    assert array_kind([a, a], "f") == "numpy"
    assert array_kind([FakeTensor()], "f") == "torch"
    with pytest.raises(MirageError, match="mix torch tensors and numpy arrays"):
        array_kind([a, FakeTensor()], "f")
    with pytest.raises(MirageError, match="argument 1 of 'f' is a list"):
        array_kind([a, [1, 2]], "f")


def test_argument_count_is_checked() -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    _, dev = fake_device()
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    with pytest.raises(MirageError, match="'fma_two_kernels' takes 2 arrays, got 1"):
        compiled(np.zeros((64, 64), np.float16))


# --- packaging ----------------------------------------------------------------------


def test_importing_the_package_needs_no_gpu_stack() -> None:
    code = (
        "import sys, mirage_xdsl, mirage_xdsl.runtime; "
        "assert callable(mirage_xdsl.compile); "
        "bad = [m for m in ('torch', 'cuda', 'cuda.bindings') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mirage_run_on_cuda_without_gpu_is_one_line(capsys) -> None:
    from mirage_xdsl.cli.run import main
    from mirage_xdsl.runtime.driver import gpu_unavailable_reason

    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU is present")
    root = Path(__file__).resolve().parent.parent
    assert main(["--device", "cuda", str(root / "examples" / "gqa.mlir")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_mirage_run_names_an_unknown_gpu_target_in_one_line(
    capsys, monkeypatch
) -> None:
    from mirage_xdsl.cli.run import main

    monkeypatch.setenv("MIRAGE_GPU", "B200")
    root = Path(__file__).resolve().parent.parent
    assert main(["--device", "cuda", str(root / "examples" / "gqa.mlir")]) == 1
    err = capsys.readouterr().err
    assert err == "error: MIRAGE_GPU=B200 names no GPU target (known: H100, H200)\n"


def test_lowering_entry_point_is_named_when_missing(monkeypatch) -> None:
    from mirage_xdsl.runtime import lower

    monkeypatch.setitem(sys.modules, "mirage_xdsl.lowering.cuda", None)
    with pytest.raises(MirageError, match=r"mirage_xdsl.lowering.cuda\) is not"):
        lower(None)


# --- the torch path, with a stand-in torch over fake device memory -------------------


class _Dtype:
    def __init__(self, name: str, numpy_dtype):
        self.name, self.numpy_dtype = name, np.dtype(numpy_dtype)

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _DeviceTensor(FakeTensor):
    def __init__(self, fake: FakeDriver, shape, dtype: _Dtype):
        n = int(np.prod(shape))
        ptr = int(fake.cuMemAlloc(n * dtype.numpy_dtype.itemsize)[1])
        super().__init__(shape=tuple(shape), dtype=dtype, ptr=ptr)

    def numpy(self) -> np.ndarray:
        n = int(np.prod(self.shape))
        return view(self._ptr, self.dtype.numpy_dtype, n).reshape(self.shape)


_DeviceTensor.__module__ = "torch.fake"


def fake_torch(fake: FakeDriver, stream: int) -> SimpleNamespace:
    dtypes = {"float16": np.float16, "float32": np.float32, "bfloat16": np.uint16}
    return SimpleNamespace(
        **{name: _Dtype(name, d) for name, d in dtypes.items()},
        empty=lambda shape, dtype, device: _DeviceTensor(fake, shape, dtype),
        cuda=SimpleNamespace(
            current_stream=lambda device: SimpleNamespace(cuda_stream=stream)
        ),
    )


def test_torch_path_runs_in_place_on_the_current_stream(monkeypatch) -> None:
    test = SELFTESTS["two_kernels_with_intermediate"]
    fake, dev = fake_device()
    torch = fake_torch(fake, stream=77)
    monkeypatch.setitem(sys.modules, "torch", torch)
    compiled = CompiledProgram(test.program, device=dev, cache=CubinCache(None))
    a, b = (_DeviceTensor(fake, s.shape, torch.float16) for s in compiled.inputs())
    xa, xb = _inputs(test.program, 4)
    a.numpy()[:], b.numpy()[:] = xa, xb
    out = compiled(a, b)
    assert isinstance(out, _DeviceTensor) and str(out.dtype) == "torch.float16"
    ref = xa.astype(np.float32) * xb + xa
    np.testing.assert_allclose(
        out.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3
    )
    assert {x.stream for x in fake.launches} == {77}
    assert fake.launches[0].pointers[:2] == [a.data_ptr(), b.data_ptr()]
    assert fake.launches[1].pointers[2] == out.data_ptr()

    given = _DeviceTensor(fake, out.shape, torch.float16)
    (result,) = compiled.run(
        a, b, outputs=[given], stream=SimpleNamespace(cuda_stream=5)
    )
    assert result is given and fake.launches[-1].stream == 5
    with pytest.raises(MirageError, match=r"output 0 \('out'\) .* aliases an input"):
        compiled(a, b, outputs=[a])
