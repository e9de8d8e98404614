"""The interpreter against plain numpy, for every workload and hand-written µGraph."""

import numpy as np
import pytest

from mirage_xdsl.semantics.interpreter import run, split_tiles, stitch_tiles
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS, random_inputs


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("batch", [1, 8])
def test_workload_matches_numpy(name: str, batch: int) -> None:
    workload = WORKLOADS[name]
    module = workload.module(batch, scale=8)
    xs = random_inputs(module, seed=batch)
    outs = run(module, xs)
    refs = workload.reference(*xs)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        assert out.shape == ref.shape
        assert rel_err(out, ref) < 1e-5


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
@pytest.mark.parametrize("batch", [1, 8])
def test_handwritten_matches_plain(name: str, batch: int) -> None:
    workload_name, build = HANDWRITTEN[name]
    plain = WORKLOADS[workload_name].module(batch, scale=4)
    custom = (
        build(batch, scale=4)
        if name != "gqa_flashdecoding"
        else build(batch, scale=4, splits=4, forloop=4)
    )
    xs = random_inputs(plain, seed=3)
    for out, ref in zip(run(custom, xs), run(plain, xs), strict=True):
        assert rel_err(out, ref) < 1e-5


def test_handwritten_full_shape() -> None:
    _, build = HANDWRITTEN["rmsnorm_linear_fused"]
    custom = build(1)
    xs = random_inputs(custom, seed=1)
    (out,) = run(custom, xs)
    (ref,) = WORKLOADS["rmsnorm_linear"].reference(*xs)
    assert rel_err(out, ref) < 1e-5


def test_split_and_stitch_are_inverse() -> None:
    x = np.arange(4 * 6 * 8).reshape(4, 6, 8)
    grid = (2, 3, 1)
    tiles = split_tiles(x, (0, 1, -1), 2, grid, forloop=4)
    assert tiles.shape == (2, 3, 1, 4, 2, 2, 2)
    # block (1, 2), iteration 3 sees rows 2..3, cols 4..5, last-dim 6..7
    assert np.array_equal(tiles[1, 2, 0, 3], x[2:4, 4:6, 6:8])
    whole = split_tiles(x, (0, 1, -1), -1, grid, forloop=1)
    assert np.array_equal(stitch_tiles(whole, (0, 1, -1), grid), x)


def test_replicated_input_broadcasts() -> None:
    x = np.arange(12).reshape(3, 4)
    tiles = split_tiles(x, (-1, 1, -1), -1, (5, 2, 1), forloop=1)
    assert tiles.shape == (1, 2, 1, 1, 3, 2)


def _field_outputs(module, seed: int = 3) -> list[np.ndarray]:
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.verify.finite_field import FiniteFieldDomain

    domain = FiniteFieldDomain(seed)
    rng = np.random.default_rng(seed)
    types = entry_function(module).function_type.inputs.data
    xs = [domain.random(rng, tuple(t.get_shape())) for t in types]
    return [domain.to_numpy(v)[0] for v in run(module, xs, domain)]


def test_accumulated_matmul_folding_matches_per_iteration(monkeypatch) -> None:
    """Folding a for-loop's matmuls into one matmul over the concatenated
    contraction (or factoring out a loop-invariant operand) gives exactly the
    residues of evaluating and summing each iteration's product."""
    from mirage_xdsl.fuzz.programs import random_module
    from mirage_xdsl.semantics import interpreter

    modules = [build(b, 8) for _, build in HANDWRITTEN.values() for b in (1, 2)]
    modules += [random_module(np.random.default_rng(s)) for s in range(60)]
    folded = [_field_outputs(m) for m in modules]
    monkeypatch.setattr(interpreter, "_accumulated_matmul", lambda op, args: None)
    for module, want in zip(modules, folded, strict=True):
        got = _field_outputs(module)
        assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_folding_applies_to_the_flashdecoding_loop() -> None:
    from mirage_xdsl.dialects import block
    from mirage_xdsl.semantics.interpreter import _accumulated_matmul

    module = HANDWRITTEN["gqa_flashdecoding"][1](1, 8)
    matmuls = [op for op in module.walk() if isinstance(op, block.MatmulOp)]
    varying = np.zeros((1, 1, 1, 4, 2, 2))
    assert any(_accumulated_matmul(op, [varying, varying]) for op in matmuls)


def test_infinities_come_out_as_torch_gives_them_without_warnings() -> None:
    """``log(0)`` is ``-inf`` and ``0 / 0`` is 0 (``div``), with no numpy
    warning reaching the user's console."""
    import warnings

    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph()
    x = g.new_input((2, 4))
    g.mark_output(g.log(x))
    g.mark_output(g.div(x, x))
    xs = [np.array([[0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 4.0, 8.0]], np.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_x, ratio = run(g.module(), xs)
    assert np.isneginf(log_x[xs[0] == 0]).all()
    np.testing.assert_array_equal(ratio, (xs[0] != 0).astype(np.float32))
