"""Command-line drivers: ``mirage-opt`` (``opt``), ``mirage-run`` (``run``) and
``mirage-verify`` (``verify``), each a thin layer that turns bad input into
one located error line and an exit code."""
