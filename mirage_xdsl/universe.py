"""The ``xdsl.universe`` plugin: lets stock ``xdsl-opt`` load our dialects,
passes and targets."""

from xdsl.universe import Universe

from mirage_xdsl.ir.context import DIALECTS
from mirage_xdsl.registry import ALL_PASSES, ALL_TARGETS

MIRAGE_UNIVERSE = Universe(
    all_dialects=DIALECTS, all_passes=ALL_PASSES, all_targets=ALL_TARGETS
)
