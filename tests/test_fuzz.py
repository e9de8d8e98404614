"""Seeded, bounded fuzzing of the foundation (``tools/fuzz.py`` runs it longer).

Each kind runs a fixed range of seeds through its oracle in
``mirage_xdsl.fuzz.oracles``; a failure names the seed, and
``ORACLES[kind](seed)`` replays it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mirage_xdsl.dialects import block, kernel, thread
from mirage_xdsl.fuzz.oracles import ORACLES, FuzzFailure, case_module
from mirage_xdsl.fuzz.programs import UNFUZZED, random_module
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.ops import OPS, Form, elementwise_kinds

CASES = {
    "generate": 250,
    "round-trip": 50,
    "interpret": 100,
    "corrupt": 300,
    "perturb": 100,
    "driver": 3,
    "field": 75,
    "mutant": 10,
}
"""Cases per kind in the default run: 888 in all; the slow run takes the
seeds after these."""

SLOW_CASES = {
    "generate": 11000,
    "round-trip": 2200,
    "interpret": 2200,
    "corrupt": 6600,
    "perturb": 4400,
    "driver": 66,
    "field": 1650,
    "mutant": 440,
}
"""Seeds per kind the slow run (``-m slow``) goes up to, from where the
default run's end."""

MUST_SEE = {
    "corrupt": {"rejected", "accepted+ran"},
    "perturb": {"rejected", "accepted+ran"},
    "driver": {"rejected"},
    "mutant": {"rejected"},
}
"""Outcomes a kind must produce: corruption that never got past the parser,
or never got rejected, would test little."""


def fuzz(kind: str, seeds: range) -> None:
    oracle = ORACLES[kind]
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    for seed in seeds:
        try:
            outcomes[oracle(seed)] += 1
        except FuzzFailure as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} failures, e.g.\n" + "\n".join(failures[:5])
    assert sum(outcomes.values()) == len(seeds)
    assert MUST_SEE.get(kind, {"ok"}) <= set(outcomes), outcomes


@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz(kind: str) -> None:
    fuzz(kind, range(CASES[kind]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz_longer(kind: str) -> None:
    fuzz(kind, range(CASES[kind], SLOW_CASES[kind]))


def test_same_seed_same_module() -> None:
    for seed in range(20):
        a = module_text(random_module(np.random.default_rng(seed)))
        b = module_text(random_module(np.random.default_rng(seed)))
        assert a == b


def test_generator_covers_every_op() -> None:
    """Across a few hundred seeds, every op and every reduction kind appears
    (``log``, drawn only where its operand stays above 1, is the rarest)."""
    seen: Counter[str] = Counter()
    for seed in range(600):
        for op in case_module(seed).walk():
            seen[op.name] += 1
            if isinstance(op, block.ForloopAccumOp):
                seen[f"reduce {op.reduction}"] += 1
            if isinstance(op, kernel.CustomizedOp) and op.forloop > 1:
                seen["forloop > 1"] += 1
    wanted = {
        op.name
        for dialect in (kernel.Kernel, block.BlockDialect, thread.Thread)
        for op in dialect.operations
        if getattr(op, "KIND", None) not in UNFUZZED  # neg: values stay positive
        and op is not kernel.AllReduceOp  # one-shard programs: no collectives
    }
    wanted |= {f"reduce {r}" for r in block.ACCUM_REDUCTIONS} | {"forloop > 1"}
    assert wanted <= set(seen), sorted(wanted - set(seen))


@pytest.mark.parametrize("kind", [k for k in elementwise_kinds() if k not in UNFUZZED])
def test_an_ops_interval_encloses_its_values(kind: str) -> None:
    """The fuzz interval of an op (from the op table) bounds its numpy meaning
    on operands drawn from the operands' intervals, so the generator's range
    checks hold on the values a program computes."""
    spec = OPS[kind]
    assert spec.real is not None and spec.interval is not None
    rng = np.random.default_rng(0)
    for lo, hi in ((0.5, 1.0), (1e-3, 2.0), (2.0, 30.0)):
        x, y = rng.uniform(lo, hi, 1000), rng.uniform(2 * lo, 3 * hi, 1000)
        if spec.form is Form.BINARY:
            cases = [(spec.real(x, y), spec.interval(lo, hi, 2 * lo, 3 * hi))]
        elif spec.form is Form.SCALAR:
            cases = [
                (spec.real(x, c), spec.interval(lo, hi, c)) for c in spec.constants
            ]
        else:
            cases = [(spec.real(x), spec.interval(lo, hi))]
        for values, (low, high) in cases:
            assert low * (1 - 1e-12) <= values.min(), (kind, lo, hi)
            assert values.max() <= high * (1 + 1e-12), (kind, lo, hi)


def test_generator_options_bound_the_module() -> None:
    for seed in range(100):
        module = random_module(
            np.random.default_rng(seed),
            max_ops=2,
            max_block_ops=1,
            customized_prob=0.0,
            max_elements=64,
        )
        ops = list(module.ops.first.body.block.ops)  # type: ignore[union-attr]
        assert 1 <= len(ops) - 1 <= 2  # the ops and func.return
        assert not any(isinstance(op, kernel.CustomizedOp) for op in ops)
        for op in ops:
            for r in op.results:
                assert np.prod(r.type.get_shape()) <= 64  # type: ignore[attr-defined]
