"""Run every generated program on the GPU: check it against the interpreter, time it.

Needs an NVIDIA GPU, ``cuda-python`` and NVRTC (``pip install -e '.[gpu]'``).
For each workload (plain, lowered with ``default-customize``) and each
hand-written µGraph, at batch 1 and 8, this script compiles the program's
CUDA C with NVRTC, launches it through the driver API exactly as the
``GpuProgram`` contract describes (one pointer per buffer, in ``args``
order; dynamic shared memory above 48 KB opted in per kernel), and:

- checks the outputs against the interpreter (fresh random inputs, |x| <=
  0.5; outputs and intermediates poisoned with NaN before the run): relative
  L2 error below 1e-2 and no NaN;
- times the whole launch sequence with CUDA events, L2 flushed before each
  repetition, and reports the median.

Usage: ``python tools/gpu_check_kernels.py [--reps 50] [--only NAME] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from mirage_xdsl.lowering import nvrtc
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.lowering.program import GpuProgram
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS, random_inputs

NUMPY = {"f16": np.float16, "f32": np.float32}
FLUSH_BYTES = 256 << 20


def driver():
    from cuda.bindings import driver as cu  # type: ignore[import-not-found]

    return cu


def check(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err}")
    return rest[0] if len(rest) == 1 else rest


class Runner:
    """A compiled GpuProgram with its device buffers."""

    def __init__(self, program: GpuProgram):
        cu = driver()
        self.cu, self.program = cu, program
        cubin = nvrtc.compile_cuda(program.source, arch=program.arch).cubin
        self.module = check(cu.cuModuleLoadData(cubin))
        self.functions = {}
        for launch in program.launches:
            fn = check(cu.cuModuleGetFunction(self.module, launch.name.encode()))
            attr = (
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            )
            check(cu.cuFuncSetAttribute(fn, attr, launch.shared_bytes))
            self.functions[launch.name] = fn
        self.buffers = {}
        for b in program.buffers:
            nbytes = int(np.prod(b.shape)) * np.dtype(NUMPY[b.dtype]).itemsize
            self.buffers[b.name] = (check(cu.cuMemAlloc(nbytes)), nbytes, b)
        self.params = {}
        for launch in program.launches:
            offsets = launch.offsets or (0,) * len(launch.args)
            values = np.array(
                [
                    int(self.buffers[a][0])
                    + at * np.dtype(NUMPY[self.buffers[a][2].dtype]).itemsize
                    for a, at in zip(launch.args, offsets, strict=True)
                ],
                np.uint64,
            )
            pointers = np.array(
                [values.ctypes.data + 8 * i for i in range(len(values))], np.uint64
            )
            self.params[launch.name] = (values, pointers)

    def upload(self, inputs: list[np.ndarray]) -> None:
        cu = self.cu
        for spec, x in zip(self.program.inputs(), inputs, strict=True):
            data = np.ascontiguousarray(x, NUMPY[spec.dtype])
            check(
                cu.cuMemcpyHtoD(
                    self.buffers[spec.name][0], data.ctypes.data, data.nbytes
                )
            )
        for ptr, nbytes, spec in self.buffers.values():
            if spec.kind != "input":
                check(cu.cuMemsetD8(ptr, 0xFF, nbytes))  # NaN in f16 and f32

    def launch(self) -> None:
        cu = self.cu
        for launch in self.program.launches:
            check(
                cu.cuLaunchKernel(
                    self.functions[launch.name],
                    *launch.grid,
                    *launch.block,
                    launch.shared_bytes,
                    0,
                    self.params[launch.name][1].ctypes.data,
                    0,
                )
            )

    def download(self) -> list[np.ndarray]:
        out = []
        for spec in self.program.outputs():
            host = np.empty(spec.shape, NUMPY[spec.dtype])
            check(
                self.cu.cuMemcpyDtoH(
                    host.ctypes.data, self.buffers[spec.name][0], host.nbytes
                )
            )
            out.append(host)
        return out

    def time(self, reps: int) -> float:
        cu = self.cu
        flush = check(cu.cuMemAlloc(FLUSH_BYTES))
        start, stop = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
        times = []
        for _ in range(reps + 3):
            check(cu.cuMemsetD8(flush, 0, FLUSH_BYTES))
            check(cu.cuEventRecord(start, 0))
            self.launch()
            check(cu.cuEventRecord(stop, 0))
            check(cu.cuEventSynchronize(stop))
            times.append(check(cu.cuEventElapsedTime(start, stop)) * 1000.0)
        check(cu.cuMemFree(flush))
        return float(np.median(times[3:]))


def programs(only: str | None):
    for name, workload in WORKLOADS.items():
        for batch in (1, 8):
            yield f"{name}_b{batch}", workload.module(batch)
    for name, (_, build) in HANDWRITTEN.items():
        for batch in (1, 8):
            yield f"{name}_b{batch}", build(batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--only", help="run programs whose name contains this")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    cu = driver()
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    context = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(context))
    rows, failed = [], 0
    for name, module in programs(args.only):
        if args.only and args.only not in name:
            continue
        program = generate_program(module)
        runner = Runner(program)
        xs = random_inputs(module, seed=1234, low=-0.5, high=0.5)
        runner.upload(xs)
        runner.launch()
        check(cu.cuCtxSynchronize())
        got = runner.download()
        ref = run(module, xs)
        errors = [
            float(np.linalg.norm(g.astype(np.float64) - r) / np.linalg.norm(r))
            for g, r in zip(got, ref, strict=True)
        ]
        ok = all(e < 1e-2 for e in errors) and not any(np.isnan(g).any() for g in got)
        failed += not ok
        us = runner.time(args.reps)
        rows.append(
            {
                "program": name,
                "ok": ok,
                "error": max(errors),
                "us": us,
                "launches": len(program.launches),
            }
        )
        print(
            f"{name:28s} {'ok ' if ok else 'BAD'} err {max(errors):.1e}  "
            f"{us:9.1f} us  {len(program.launches)} launches",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
