"""Module passes of mirage-xdsl, one module each.

The names ``-p`` accepts, for these passes and for the lowering's, are listed in
:mod:`mirage_xdsl.registry`.
"""
