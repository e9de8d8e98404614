"""Output targets (``-t NAME``) of mirage-xdsl, in xDSL's ``Target`` shape."""

from collections.abc import Callable

from xdsl.utils.target import Target


def _all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {}


ALL_TARGETS = _all_targets()
