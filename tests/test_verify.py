"""The equivalence verifier: verdicts, bounds, signatures, float cross-check."""

import math

import pytest

from mirage_xdsl.verify.equivalence import (
    TARGET_BOUND,
    equivalent,
    float_check,
    trials_for,
)
from mirage_xdsl.verify.fingerprint_bound import program_degrees, trial_bound
from mirage_xdsl.workloads import ALGEBRAIC, HANDWRITTEN, WORKLOADS

SCALE = 16


def small(build, name: str, batch: int = 2):
    if name == "gqa_flashdecoding":
        return build(batch, SCALE, splits=4, forloop=4)
    return build(batch, SCALE)


@pytest.mark.parametrize("name", sorted(HANDWRITTEN) + sorted(ALGEBRAIC))
def test_correct_rewrites_are_accepted(name: str) -> None:
    workload, build = {**HANDWRITTEN, **ALGEBRAIC}[name]
    plain = WORKLOADS[workload].module(2, SCALE)
    rewrite = small(build, name)
    assert float_check(plain, rewrite).agree
    verdict = equivalent(plain, rewrite)
    assert verdict.equivalent, verdict.reason
    assert verdict.false_positive_bound <= TARGET_BOUND
    assert verdict.trials == trials_for(verdict.per_trial_bound)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_trials_reach_the_target_at_full_shapes(name: str) -> None:
    for batch in (1, 8):
        degrees = program_degrees(WORKLOADS[name].module(batch))
        per_trial = trial_bound(degrees, degrees).total
        assert per_trial < 2**-17
        assert per_trial ** trials_for(per_trial) <= TARGET_BOUND
        assert trials_for(per_trial) <= 3


def test_different_workloads_are_rejected() -> None:
    gqa = WORKLOADS["gqa"].module(1, SCALE)
    qknorm = WORKLOADS["qknorm_gqa"].module(1, SCALE)
    verdict = equivalent(gqa, qknorm)
    assert not verdict.equivalent and verdict.false_positive_bound == 0.0
    assert "output #0 differs" in verdict.reason
    assert not float_check(gqa, qknorm).agree


def test_signature_mismatch_names_the_difference() -> None:
    a = WORKLOADS["gqa"].module(1, SCALE)
    b = WORKLOADS["gqa"].module(2, SCALE)
    verdict = equivalent(a, b)
    assert not verdict.equivalent and verdict.trials == 0
    assert "input #0 is [1, 2, 16, 64] of f16 in the first program" in verdict.reason
    lora = WORKLOADS["lora"].module(1, SCALE)
    assert "have 3 and 4 inputs" in equivalent(a, lora).reason


def test_explicit_trials_and_bound() -> None:
    a = WORKLOADS["lora"].module(1, SCALE)
    b = small(HANDWRITTEN["lora_fused"][1], "lora_fused", 1)
    one = equivalent(a, b, trials=1, seed=7)
    assert one.equivalent and one.trials == 1
    assert math.isclose(one.false_positive_bound, one.per_trial_bound)
    three = equivalent(a, b, trials=3)
    assert math.isclose(three.false_positive_bound, three.per_trial_bound**3)


def test_sqrt_identities_are_not_recognised() -> None:
    # rms_norm(2x) = rms_norm(x) over the reals, but only through
    # sqrt(4m) = 2 sqrt(m), which the random sqrt function does not satisfy.
    from mirage_xdsl.ir.builder import float16, new_kernel_graph

    def build(double: bool):
        g = new_kernel_graph("f")
        x = g.new_input((2, 8), float16)
        g.mark_output(g.rms_norm(g.add(x, x) if double else x))
        return g.module()

    assert float_check(build(False), build(True)).agree
    assert not equivalent(build(False), build(True)).equivalent


def test_cli_device_without_a_gpu_is_one_line_error(monkeypatch, capsys) -> None:
    from mirage_xdsl.cli import verify as cli

    monkeypatch.setattr(cli, "gpu_arithmetic", lambda: None)
    assert (
        cli.main(["examples/lora.mlir", "examples/lora_fused.mlir", "--device", "cuda"])
        == 1
    )
    assert (
        capsys.readouterr().err == "error: --device cuda: torch sees no CUDA GPU here\n"
    )


def _one_input(build):
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph()
    x = g.new_input((4, 16))
    g.mark_output(build(g, x))
    return g.module()


def test_scalar_constants_are_exact_rationals():
    """A wrong constant is rejected; constants that multiply out equal are
    accepted, also as exponents (exp(x/2)^2 = exp(x))."""
    from mirage_xdsl.verify import equivalent as verify

    eighth = _one_input(lambda g, x: g.mul_scalar(x, 0.125))
    assert not verify(eighth, _one_input(lambda g, x: g.mul_scalar(x, 0.25))).equivalent
    split = _one_input(lambda g, x: g.mul_scalar(g.mul_scalar(x, 0.5), 0.25))
    assert verify(eighth, split).equivalent
    half_exp = _one_input(lambda g, x: g.square(g.exp(g.mul_scalar(x, 0.5))))
    assert verify(_one_input(lambda g, x: g.exp(x)), half_exp).equivalent
    shifted = _one_input(lambda g, x: g.add_scalar(g.add_scalar(x, 0.75), -0.25))
    assert verify(_one_input(lambda g, x: g.add_scalar(x, 0.5)), shifted).equivalent
    eps = _one_input(lambda g, x: g.rms_norm(x, eps=1e-6))
    assert not verify(eps, _one_input(lambda g, x: g.rms_norm(x))).equivalent


def test_identities_through_a_keyed_function_are_not_proved() -> None:
    """relu(x) - relu(-x) = x holds, but relu is a keyed random function in
    the field: the verifier says "not equivalent" (safe, incomplete) while the
    float cross-check agrees, as docs/verifier.md states."""
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.verify.equivalence import equivalent, float_check

    g = new_kernel_graph("identity")
    x = g.new_input((4, 8))
    g.mark_output(g.add(g.relu(x), g.neg(g.relu(g.neg(x)))))
    lhs = g.module()
    h = new_kernel_graph("identity")
    h.mark_output(h.new_input((4, 8)))
    rhs = h.module()
    assert float_check(lhs, rhs).agree
    assert not equivalent(lhs, rhs).equivalent
