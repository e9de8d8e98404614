"""Output targets (``-t NAME``) of mirage-xdsl, in xDSL's ``Target`` shape."""

from collections.abc import Callable

from xdsl.utils.target import Target


def _dot() -> type[Target]:
    from mirage_xdsl.dot import DotTarget

    return DotTarget


def _all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {
        "dot": _dot,
    }


ALL_TARGETS = _all_targets()
