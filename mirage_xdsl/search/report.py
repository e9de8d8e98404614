"""What a search found and did: candidates, the report, the outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import func

from mirage_xdsl.ir.diagnostics import first_line
from mirage_xdsl.search.ugraph import UGraph

SCREENING = "screening "
"""How a ``failures`` line from screening on random inputs begins."""
TIMING = "timing "
"""How a ``failures`` line from timing on the device begins."""


@dataclass(frozen=True)
class Candidate:
    cost: float
    graph: UGraph
    screened: bool

    def order(self) -> tuple:
        return (self.cost, self.graph.kernels, repr(self.graph))


@dataclass
class Report:
    """What a search did; printed by the pass."""

    function: str
    explored: int = 0
    unexplored: int = 0
    """Block-level ops of rounds that the budget or the class cap cut short,
    never tried (``stats.Stats.unexplored``): ``explored`` plus this
    is a lower bound on the graphs a stopped search's space holds."""
    pruned: int = 0
    complete: int = 0
    screened: int = 0
    verified: int = 0
    rejected: int = 0
    tasks: list[int] = field(default_factory=list)
    """Tasks (a prefix and a layout or library op) made per kernel depth, once
    the cost bound has dropped what it can when making them: the size of the
    space each depth searches."""
    bounded: int = 0
    """Deeper prefixes dropped because no completion could beat the best
    µGraph already found (``bound.py``)."""
    skipped: int = 0
    """Tasks not run because their prefix's cost plus the least their own
    kernel costs reached the limit (``bound.py``): when the tasks were made,
    or when a worker came to them after a cheaper µGraph was found."""
    input_cost: float = 0.0
    best_cost: float = 0.0
    kernels_before: int = 0
    kernels_after: int = 0
    seconds: float = 0.0
    budget: float = 0.0
    """The seconds the search was given (a segment's share of its program's)."""
    stopped: str = ""
    cached: bool = False
    verifier: str = ""
    measured_by: str = ""
    """What timed the candidates (``gpu:<device>:triton-<version>``), or empty
    when the cost model chose."""
    measured: list[dict] = field(default_factory=list)
    """Every timed candidate: kernels, the cost model's estimate, the measured
    time per call and backend, and its program text (what calibrating the
    cost model refits against); the chosen one has ``chosen: true``."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent generating (``search``), verifying the defaults and the
    candidates (``verify``) and compiling and timing them (``measure``): where
    a search that overran its budget spent the time."""
    failures: list[str] = field(default_factory=list)
    """One line per candidate that could not be built or run, when screened
    on random inputs or timed on the device (those lines begin with
    :data:`SCREENING` and :data:`TIMING`): what failed and why. Such a
    candidate loses (it fails screening, or is timed with the backends that
    worked, or not at all: a kernel not compiled by the search's deadline),
    but the reason is kept. The summary line counts the screening failures
    beside the candidates that passed, and the timing failures beside those
    timed."""

    def summary(self) -> str:
        speedup = self.input_cost / self.best_cost if self.best_cost else 1.0
        status = f", stopped: {self.stopped}" if self.stopped else ""
        cached = " (cached)" if self.cached else ""
        screening = [f for f in self.failures if f.startswith(SCREENING)]
        failed = f" ({len(screening)} failed)" if screening else ""
        return (
            f"superoptimize @{self.function}{cached}: {self.explored} graphs explored, "
            f"{self.pruned} pruned by abstract expression, {self.bound_summary()}"
            f"{self.complete} complete, {self.screened} passed screening{failed}, "
            f"{self.verified} verified ({self.verifier or 'none'}); "
            f"kernels {self.kernels_before} -> {self.kernels_after}; "
            f"cost {self.input_cost * 1e6:.1f} us -> {self.best_cost * 1e6:.1f} us "
            f"({speedup:.2f}x){self.measured_summary()}; {self.seconds:.1f} s"
            f"{self.phase_summary()}{status}"
        )

    def phase_summary(self) -> str:
        if not self.phases:
            return ""
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.phases.items())
        return f" ({parts})"

    def bound_summary(self) -> str:
        if not (self.bounded or self.skipped):
            return ""
        return (
            f"{self.bounded} deeper prefixes and {self.skipped} tasks "
            "cut by the cost bound, "
        )

    def measured_summary(self) -> str:
        chosen = [m for m in self.measured if m.get("chosen")]
        first = [m for m in self.measured if m.get("input")]
        if not chosen or chosen[0].get("time_us") is None:
            return ""
        c = chosen[0]
        text = f"; measured {c['time_us']:.1f} us"
        if c.get("backend"):  # a plain callable measure names none
            text += f" ({c['backend']})"
        if first and first[0].get("time_us"):
            text += f", input {first[0]['time_us']:.1f} us"
        untimed = sum(m.get("time_us") is None for m in self.measured)
        if untimed:  # not built or not run: why is in ``failures``
            return text + f", {len(self.measured) - untimed} timed ({untimed} failed)"
        return text + f", {len(self.measured)} timed"

    def to_json(self) -> dict:
        return dict(self.__dict__)


def failure(what: str, error: BaseException) -> str:
    """One line for the report's ``failures``: what failed and the error."""
    return f"{what}: {type(error).__name__}: {first_line(str(error))}"


@dataclass
class Outcome:
    graph: UGraph | None
    """The light graph of the result (None when it came from the cache)."""
    function: func.FuncOp
    report: Report
    candidates: list[Candidate] = field(default_factory=list)
