"""Fuzz oracles: one seeded case each, shared by the tests and ``tools/fuzz.py``.

Each oracle builds its case from ``seed`` alone, checks one property of the
foundation and returns a short outcome label (for the driver's tallies). A
broken property raises :class:`FuzzFailure` naming the seed, so any failure
replays with ``ORACLES[kind](seed)``. Any other exception escaping an oracle
is a crash of the code under test.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType

from mirage_xdsl.fuzz.mutate import MUTATORS, mutate
from mirage_xdsl.fuzz.programs import VALUE_MAX, VALUE_MIN, random_inputs, random_module
from mirage_xdsl.ir.builder import bfloat16, float16, float32
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError, parse, verify
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.equivalence import equivalent
from mirage_xdsl.verify.finite_field import FiniteFieldDomain, P, Q
from mirage_xdsl.verify.mutants import mutants

DIAGNOSTIC = re.compile(r"\A[^\n]+:\d+:\d+: error: [^\n]+\Z")
"""A user-facing error: one line, located."""

MUTANT_RUN_ELEMENTS = 1 << 16
"""Mutants that verify are also interpreted if no tensor is larger than this."""

DTYPES = (float16, bfloat16, float32)


class FuzzFailure(AssertionError):
    """A fuzz case broke a property; the message says which seed and how."""

    def __init__(self, kind: str, seed: int, detail: str):
        super().__init__(f"{kind} seed {seed}: {detail}")
        self.kind, self.seed = kind, seed


def case_module(seed: int) -> ModuleOp:
    """The random module of a seed, with all element types in play."""
    rng = np.random.default_rng(seed)
    return random_module(rng, dtypes=DTYPES, customized_prob=0.4)


def generated_verifies(seed: int) -> str:
    try:
        verify(case_module(seed))
    except MirageError as e:
        raise FuzzFailure("generate", seed, f"generated module fails: {e}") from None
    return "ok"


def round_trip(seed: int) -> str:
    """print -> parse -> verify -> print gives the same text."""
    text = module_text(case_module(seed))
    try:
        module = parse(make_context(), text, f"seed{seed}.mlir")
        verify(module)
    except MirageError as e:
        raise FuzzFailure("round-trip", seed, f"printed module rejected: {e}") from None
    again = module_text(module)
    if again != text:
        raise FuzzFailure("round-trip", seed, "text changed:\n" + text + again)
    return "ok"


def interpret(seed: int) -> str:
    """The float interpreter runs and stays in the generator's value range."""
    module = case_module(seed)
    outs = run(module, random_inputs(module, seed))
    types = entry_function(module).function_type.outputs.data
    for i, (out, ty) in enumerate(zip(outs, types, strict=True)):
        assert isinstance(ty, TensorType)
        if out.shape != tuple(ty.get_shape()):
            raise FuzzFailure("interpret", seed, f"output #{i} has shape {out.shape}")
        if not np.all(np.isfinite(out)):
            raise FuzzFailure("interpret", seed, f"output #{i} is not finite")
        low, high = float(out.min()), float(out.max())
        if low < VALUE_MIN * 0.99 or high > VALUE_MAX * 1.01:
            raise FuzzFailure(
                "interpret", seed, f"output #{i} in [{low}, {high}], out of range"
            )
    return "ok"


def corrupt(seed: int) -> str:
    """A corrupted module is rejected with one located line, or it is valid.

    A corrupted module that still verifies must also run in the interpreter
    (if small): whatever the verifier accepts, the semantics must define.
    """
    rng = np.random.default_rng(seed)
    text = module_text(random_module(rng, dtypes=DTYPES, customized_prob=0.4))
    data, _ = mutate(text.encode(), rng, rounds=int(rng.integers(1, 4)))
    return check_mutant("corrupt", seed, data)


def perturb(seed: int) -> str:
    """As :func:`corrupt`, changing only numbers: sizes, dims, maps, ranges.

    Such mutants mostly still parse, so they exercise the verifiers.
    """
    rng = np.random.default_rng(seed)
    data = module_text(random_module(rng, dtypes=DTYPES, customized_prob=0.5)).encode()
    for _ in range(int(rng.integers(1, 3))):
        data = MUTATORS["change-number"](data, rng)
    return check_mutant("perturb", seed, data)


def check_mutant(kind: str, seed: int, data: bytes) -> str:
    try:
        module = parse(make_context(), data, "fuzz.mlir")
        verify(module)
    except MirageError as e:
        if not DIAGNOSTIC.match(str(e)):
            raise FuzzFailure(
                kind, seed, f"diagnostic not one located line: {e!r}"
            ) from None
        return "rejected"
    if not small_enough(module):
        return "accepted"
    try:
        run(module, random_inputs(module, seed))
    except Exception as e:
        raise FuzzFailure(
            kind, seed, f"verified mutant crashes the interpreter: {e!r}"
        ) from e
    return "accepted+ran"


def small_enough(module: ModuleOp) -> bool:
    """Whether the module has a function whose tensors are all small."""
    try:
        fn = entry_function(module)
    except ValueError:
        return False
    types = [*fn.function_type.inputs.data]
    types += [v.type for op in module.walk() for v in (*op.results, *op.operands)]
    return all(
        int(np.prod(t.get_shape(), dtype=object)) <= MUTANT_RUN_ELEMENTS
        for t in types
        if isinstance(t, TensorType)
    )


def driver(seed: int) -> str:
    """``mirage-opt`` on a corrupted file: exit 0, or exit 1 with one line."""
    rng = np.random.default_rng(seed)
    text = module_text(random_module(rng, customized_prob=0.4))
    data, _ = mutate(text.encode(), rng, rounds=int(rng.integers(1, 4)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.mlir"
        path.write_bytes(data)
        result = subprocess.run(
            ["mirage-opt", str(path)], capture_output=True, text=True, timeout=120
        )
    err = result.stderr.strip()
    if result.returncode == 0 and not err:
        return "accepted"
    if result.returncode != 1 or "Traceback" in err or not DIAGNOSTIC.match(err):
        raise FuzzFailure(
            "driver", seed, f"exit {result.returncode}, stderr {result.stderr!r}"
        )
    return "rejected"


POLYNOMIAL_KINDS = (
    "add", "mul", "matmul", "reduce_sum", "concat", "forloop_accum",
    "customized", "thread_graph",
)  # fmt: skip
"""Ops whose float and finite-field meanings agree exactly on small integers."""


def field_consistency(seed: int) -> str:
    """On integer inputs in {-1, 0, 1}, a polynomial program computes the same
    integers in fp32 (exact: the generator keeps them below 10^4) as in
    Z_p x Z_q: both domains see one partition semantics."""
    rng = np.random.default_rng(seed)
    module = random_module(
        rng, kinds=POLYNOMIAL_KINDS, reductions=("none", "sum"), customized_prob=0.5
    )
    shapes = [t.get_shape() for t in entry_function(module).function_type.inputs.data]  # type: ignore[attr-defined]
    xs = [rng.integers(-1, 2, s) for s in shapes]
    floats = run(module, xs)
    domain = FiniteFieldDomain(seed)
    fields = [domain.to_numpy(z) for z in run(module, xs, domain)]
    for i, (f, (z_p, z_q)) in enumerate(zip(floats, fields, strict=True)):
        exact = f.astype(np.int64)
        if not np.array_equal(exact, f) or np.abs(exact).max(initial=0) >= 1 << 24:
            raise FuzzFailure("field", seed, f"output #{i} is not a small integer")
        if not (
            np.array_equal(np.mod(exact, P), z_p)
            and np.array_equal(np.mod(exact, Q), z_q)
        ):
            raise FuzzFailure("field", seed, f"output #{i} differs between domains")
    return "ok"


MUTANTS_PER_CASE = 2


def mutant_rejected(seed: int) -> str:
    """The equivalence verifier rejects every mutant that differs in fp32."""
    rng = np.random.default_rng(seed)
    module = random_module(rng, max_ops=4, max_block_ops=4)
    found = mutants(module)
    if not found:
        return "no-mutant"
    xs = random_inputs(module, seed)
    reference = run(module, xs)
    outcome = "float-equal"
    for index in rng.permutation(len(found))[:MUTANTS_PER_CASE]:
        mutant = found[int(index)]
        with np.errstate(all="ignore"):
            if not differs(run(mutant.module, xs), reference):
                continue  # an accidentally equivalent edit
        verdict = equivalent(module, mutant.module, seed=seed)
        if verdict.equivalent:
            raise FuzzFailure(
                "mutant", seed, f"verifier accepts {mutant.description}: {verdict}"
            )
        outcome = "rejected"
    return outcome


def differs(outs: list[np.ndarray], refs: list[np.ndarray], rtol: float = 1e-3) -> bool:
    """Relative Frobenius error above ``rtol`` on some output (inf/nan count)."""
    for out, ref in zip(outs, refs, strict=True):
        if out.shape != ref.shape:
            return True
        error = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        if not error <= rtol:
            return True
    return False


ORACLES: dict[str, Callable[[int], str]] = {
    "generate": generated_verifies,
    "round-trip": round_trip,
    "interpret": interpret,
    "corrupt": corrupt,
    "perturb": perturb,
    "driver": driver,
    "field": field_consistency,
    "mutant": mutant_rejected,
}
"""Every fuzz kind, by name."""
