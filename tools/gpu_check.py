#!/usr/bin/env python3
"""Correctness of generated GPU code: every program against the interpreter.

Cases, in order:
  selftest     the runtime's own hand-written kernels (no code generator involved)
  workload     each of WORKLOADS at each batch, lowered as written (bare kernel ops)
  handwritten  each hand-written µGraph of HANDWRITTEN at each batch
  random       N random valid µGraphs from mirage_xdsl.fuzz.programs (when it is installed)

Each case is lowered with ``generate_program`` and compiled with NVRTC (or, with
``--backend triton``, printed as Triton kernels and compiled by Triton, every
matmul form of each kernel checked: untuned settings), and run on
the GPU ``--trials`` times on fresh random inputs (uniform in ±amplitude; random
µGraphs take ``mirage_xdsl.fuzz.programs.random_inputs``, the range their values are
bounded for), with every output and intermediate poisoned with NaN first;
trials alternate between the torch-tensor and numpy paths. The outputs are compared with the reference
interpreter (fp32): a case passes when every output's relative L2 error is at
most the tolerance (default 2e-2: fp16 storage with fp32 accumulation) and no
element is NaN. Cases run in a worker process; a kernel fault (which spoils the
CUDA context) or a hang only costs its own case: the worker is restarted after it.

  python tools/gpu_check.py                    # everything, on the GPU
  python tools/gpu_check.py --compile-only     # lower + NVRTC only (no GPU needed)
  python tools/gpu_check.py --only gqa --batches 1

Prints a table and ``gpu_check: N PASS, M FAIL``; exits 1 when any case fails.
Writes gpu_check.json and gpu_check.md to --out (default: $OUT, if set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

STICKY = (
    "ILLEGAL_ADDRESS",
    "LAUNCH_FAILED",
    "MISALIGNED_ADDRESS",
    "ILLEGAL_INSTRUCTION",
    "HARDWARE_STACK_ERROR",
    "INVALID_PC",
    "ASSERT",
    "LAUNCH_TIMEOUT",
    "ECC_UNCORRECTABLE",
    "INVALID_ADDRESS_SPACE",
)
"""CUDA errors after which the context is unusable: the worker must restart."""

STICKY_EXIT = 3


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    batch: int | None = None
    seed: int = 0

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}" + (
            "" if self.batch is None else f" b={self.batch}"
        )


@dataclass
class Result:
    case: str
    status: str
    """PASS, FAIL (wrong numbers), ERROR (did not build or run), TIMEOUT, COMPILED."""
    error: float | None = None
    detail: str = ""
    launches: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


# --- the cases ---------------------------------------------------------------------


def fuzz_module():
    try:
        from mirage_xdsl.fuzz.programs import random_module
    except ImportError:
        return None
    return random_module


def cases(args) -> list[Case]:
    from mirage_xdsl.runtime.selftest import SELFTESTS
    from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

    def wanted(name: str) -> bool:
        return not args.only or any(o in name for o in args.only)

    out = [Case("selftest", n) for n in SELFTESTS if wanted(n)]
    for kind, names in (("workload", WORKLOADS), ("handwritten", HANDWRITTEN)):
        out += [Case(kind, n, b) for n in names if wanted(n) for b in args.batches]
    if args.random and fuzz_module() is not None:
        seeds = range(args.seed, args.seed + args.random)
        out += [
            Case("random", f"seed{s}", None, s) for s in seeds if wanted(f"seed{s}")
        ]
    return out


def build(case: Case, scale: int):
    """(module, None, reference function of the inputs) for a program, or
    (None, GpuProgram, reference) for a runtime selftest."""
    from mirage_xdsl.runtime.selftest import SELFTESTS
    from mirage_xdsl.semantics.interpreter import run
    from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

    if case.kind == "selftest":
        test = SELFTESTS[case.name]
        return (
            None,
            test.program,
            lambda *xs: test.reference(*[np.asarray(x, np.float32) for x in xs]),
        )
    if case.kind == "workload":
        module = WORKLOADS[case.name].module(case.batch, scale)
    elif case.kind == "handwritten":
        module = HANDWRITTEN[case.name][1](case.batch, scale)
    else:
        module = fuzz_module()(np.random.default_rng(case.seed))
    return module, None, lambda *xs: run(module, list(xs))


def inputs_for(program, module, seed: int, amplitude: float) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = []
    for spec in program.inputs():
        x = rng.uniform(-amplitude, amplitude, spec.shape).astype(np.float32)
        if spec.dtype == "f16":
            x = x.astype(np.float16)
        elif spec.dtype == "bf16":
            import ml_dtypes

            x = x.astype(ml_dtypes.bfloat16)
        xs.append(x)
    return xs


def check_case(case: Case, args, torch_ok: bool) -> Result:
    from mirage_xdsl.runtime import CompiledProgram, lower
    from mirage_xdsl.runtime.triton_backend import compile_triton, lower_triton

    seconds: dict[str, float] = {}
    t = time.perf_counter()
    module, program, reference = build(case, args.scale)
    triton = args.backend == "triton" and program is None
    if triton:
        triton_program = lower_triton(module)
    elif program is None:
        program = lower(module)
    seconds["lower"] = time.perf_counter() - t
    t = time.perf_counter()
    if triton:
        forms = max(len(k.variants) for k in triton_program.kernels)
        variants = [
            compile_triton(triton_program, tune=False, form=f) for f in range(forms)
        ]
    else:
        variants = [CompiledProgram(program)]
    seconds["compile"] = time.perf_counter() - t
    result = Result(
        case.label,
        "COMPILED",
        launches=len(variants[0].program.launches),
        seconds=seconds,
    )
    if args.compile_only:
        return result
    worst, details = 0.0, []
    for index, compiled in enumerate(variants):
        form = f" form {index}" if len(variants) > 1 else ""
        worst, found = run_trials(
            case, args, compiled, module, reference, torch_ok, seconds, worst
        )
        details += [d + form for d in found]
    result.error = worst
    result.status = "FAIL" if details else "PASS"
    result.detail = details[0] if details else ""
    return result


def run_trials(case, args, compiled, module, reference, torch_ok, seconds, worst):
    """Run ``compiled`` on ``args.trials`` fresh inputs; (worst error, failures)."""
    from mirage_xdsl.runtime.check import compare, run_poisoned

    program = compiled.program
    details: list[str] = []
    try:
        for trial in range(args.trials):
            # selftests check the runtime: full-range inputs; programs: fp16-safe range
            amplitude = 1.0 if case.kind == "selftest" else args.amplitude
            seed = 1000 * case.seed + 7 * trial + 1
            if case.kind == "random":
                from mirage_xdsl.fuzz.programs import random_inputs

                # the fuzz generator bounds its values for its own input range only
                xs = random_inputs(module, seed)
            else:
                xs = inputs_for(program, module, seed, amplitude)
            use_torch = torch_ok and trial % 2 == 0
            t = time.perf_counter()
            outs = run_poisoned(compiled, xs, use_torch)
            seconds["gpu"] = seconds.get("gpu", 0) + time.perf_counter() - t
            t = time.perf_counter()
            refs = reference(*xs)
            seconds["reference"] = seconds.get("reference", 0) + time.perf_counter() - t
            comparison = compare(outs, refs, args.tol)
            worst = max(worst, comparison.worst)
            if not comparison.ok:
                path = "torch" if use_torch else "numpy"
                details.append(f"trial {trial} ({path}): {comparison.summary()}")
    finally:
        compiled.close()
    return worst, details


# --- worker: runs cases from an index, one JSON line each --------------------------


def worker(args) -> int:
    torch_ok = False
    if not args.compile_only:
        from mirage_xdsl.runtime.driver import gpu_unavailable_reason

        if reason := gpu_unavailable_reason():
            print(f"gpu_check: {reason}; use --compile-only on a machine without a GPU")
            return 2
        try:
            import torch

            torch_ok = torch.cuda.is_available()
        except ImportError:
            pass
    all_cases = cases(args)
    with open(args.results, "a") as log:
        for case in all_cases[args.start :]:
            sticky = False
            try:
                result = check_case(case, args, torch_ok)
            except Exception as e:  # one case's failure must not stop the others
                message = str(e).splitlines()[0] if str(e) else type(e).__name__
                sticky = any(s in message for s in STICKY)
                if args.debug:
                    traceback.print_exc()
                result = Result(
                    case.label, "ERROR", detail=f"{type(e).__name__}: {message}"
                )
            log.write(json.dumps(asdict(result)) + "\n")
            log.flush()
            note = f"  {result.detail}" if result.detail else ""
            err = "" if result.error is None else f" {result.error:.2e}"
            print(f"  {result.status:8s} {case.label}{err}{note}", flush=True)
            if sticky:
                return STICKY_EXIT
    return 0


def supervise(args, argv: list[str]) -> list[Result]:
    """Run workers until every case has a result; restart after faults and hangs."""
    total = len(cases(args))
    results_path = Path(args.results)
    results_path.write_text("")
    start = 0
    while start < total:
        cmd = [
            sys.executable,
            __file__,
            *argv,
            "--worker",
            "--results",
            str(results_path),
            "--start",
            str(start),
        ]
        proc = subprocess.Popen(cmd)
        last_count, last_change = start, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.5)
            count = len(results_path.read_text().splitlines())
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > args.case_timeout:
                proc.kill()
                proc.wait()
                break
        done = len(results_path.read_text().splitlines())
        if proc.returncode == 2 and done == start:
            sys.exit(2)
        if done >= total or proc.returncode == 0:
            break
        if proc.returncode != STICKY_EXIT:
            # crashed or hung inside case `done`: record it, go on after it
            label = cases(args)[done].label
            status = "TIMEOUT" if proc.returncode in (-9, 137) else "ERROR"
            detail = (
                f"no result within {args.case_timeout:.0f} s"
                if status == "TIMEOUT"
                else f"worker died (exit {proc.returncode})"
            )
            with results_path.open("a") as log:
                log.write(
                    json.dumps(asdict(Result(label, status, detail=detail))) + "\n"
                )
            print(f"  {status:8s} {label}  {detail}", flush=True)
            done += 1
        start = done
    return [
        Result(**json.loads(line)) for line in results_path.read_text().splitlines()
    ]


# --- report --------------------------------------------------------------------------


def environment() -> dict[str, str]:
    env = {"python": sys.version.split()[0]}
    try:
        from mirage_xdsl.runtime.compile import nvrtc_version

        major, minor = nvrtc_version()
        env["nvrtc"] = f"{major}.{minor}"
    except Exception as e:
        env["nvrtc"] = f"unavailable ({e})"
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "not installed"
    try:
        from mirage_xdsl.runtime.driver import device

        dev = device(0)
        env["gpu"] = (
            f"{dev.info.name} ({dev.info.arch}, {dev.info.multiprocessors} SMs)"
        )
        env["driver"] = str(dev.driver.call("cuDriverGetVersion"))
    except Exception as e:
        env["gpu"] = f"none ({str(e).removeprefix('error: ')})"
    for module in ("torch", "cuda.bindings", "numpy", "xdsl"):
        try:
            env[module] = __import__(module, fromlist=["__version__"]).__version__
        except Exception:
            env[module] = "not installed"
    return env


def table(results: list[Result]) -> str:
    lines = [
        "| case | status | max rel. L2 | launches | seconds (lower / compile / gpu / ref) | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        err = "" if r.error is None else f"{r.error:.2e}"
        secs = " / ".join(
            f"{r.seconds.get(k, 0):.2f}"
            for k in ("lower", "compile", "gpu", "reference")
        )
        note = r.detail.replace("|", "\\|")[:160]
        lines.append(
            f"| {r.case} | {r.status} | {err} | {r.launches or ''} | {secs if r.seconds else ''} | {note} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str]):
    from mirage_xdsl.runtime.check import FP16_TOLERANCE, INPUT_AMPLITUDE

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument(
        "--backend",
        choices=("cuda", "triton"),
        default="cuda",
        help="code generator: CUDA C through NVRTC, or Triton (every matmul form "
        "of each kernel is checked)",
    )
    p.add_argument(
        "--scale", type=int, default=1, help="divide the workloads' large dims"
    )
    p.add_argument(
        "--random", type=int, default=20, metavar="N", help="random µGraphs (0: none)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--trials", type=int, default=2, help="runs per case on fresh inputs"
    )
    p.add_argument(
        "--tol", type=float, default=FP16_TOLERANCE, help="max relative L2 error"
    )
    p.add_argument(
        "--amplitude", type=float, default=INPUT_AMPLITUDE, help="inputs uniform in ±A"
    )
    p.add_argument(
        "--only", nargs="+", metavar="NAME", help="cases whose name contains NAME"
    )
    p.add_argument(
        "--compile-only", action="store_true", help="lower and compile, run nothing"
    )
    p.add_argument(
        "--case-timeout",
        type=float,
        default=180,
        help="seconds before a case counts as hung",
    )
    p.add_argument(
        "--out", default=os.environ.get("OUT"), help="folder for gpu_check.json/.md"
    )
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    begin = time.perf_counter()
    env = environment()
    print("gpu_check: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    if args.random and fuzz_module() is None:
        print(
            "gpu_check: random µGraphs skipped: mirage_xdsl.fuzz.programs is not available"
        )
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    scratch = out or Path(os.environ.get("TMPDIR", "/tmp"))
    args.results = str(scratch / f"gpu_check.{os.getpid()}.jsonl")
    try:
        results = supervise(args, argv)
    finally:
        Path(args.results).unlink(missing_ok=True)
    counts = {
        s: sum(r.status == s for r in results)
        for s in ("PASS", "FAIL", "ERROR", "TIMEOUT", "COMPILED")
    }
    failed = counts["FAIL"] + counts["ERROR"] + counts["TIMEOUT"]
    mode = (
        "compile-only"
        if args.compile_only
        else f"tolerance {args.tol:.0e} rel. L2, inputs ±{args.amplitude}, {args.trials} trial(s)"
    )
    summary = (
        f"gpu_check ({args.backend}): {counts['PASS']} PASS, {failed} FAIL"
        + (
            f" ({counts['FAIL']} wrong, {counts['ERROR']} error, {counts['TIMEOUT']} timeout)"
            if failed
            else ""
        )
        + (f", {counts['COMPILED']} compiled" if counts["COMPILED"] else "")
        + f" [{mode}; {time.perf_counter() - begin:.0f} s]"
    )
    text = table(results)
    print()
    print(text)
    print()
    print(summary)
    if out:
        stem = "gpu_check" if args.backend == "cuda" else f"gpu_check_{args.backend}"
        (out / f"{stem}.md").write_text(f"{text}\n\n{summary}\n")
        report = {
            "environment": env,
            "options": vars(args),
            "results": [asdict(r) for r in results],
            "summary": summary,
        }
        (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
