"""The programs of a ``torch.compile`` graph's parts, written to a directory.

With the backend option ``dump_dir`` (or ``MIRAGE_DUMP_DIR``), each part's
captured kernel-level program is written as ``<dir>/part_<digest>.mlir``, and
the program its search chose as ``part_<digest>.searched.mlir``: the text
``mirage-opt`` reads, so one part of a model can be searched, lowered or
FileChecked on its own (``mirage-opt --superoptimize part_....mlir``). A
part's name is a digest of its program, so every layer of a model that
computes the same is one file. Each file is written whole or not at all (a
temporary file renamed into place); a directory that cannot be written is
one warning line, and the compile goes on.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.printing import module_text

log = logging.getLogger("mirage_xdsl.torch")

ENV = "MIRAGE_DUMP_DIR"
"""The directory the parts' programs go to when the option is not given."""


def dump_dir(option: str | os.PathLike[str] | None) -> Path | None:
    """The directory asked for: the option, else ``$MIRAGE_DUMP_DIR``, else
    none (empty means none)."""
    chosen = option if option is not None else os.environ.get(ENV)
    return Path(chosen) if chosen else None


def write_program(directory: Path, name: str, module: ModuleOp) -> Path | None:
    """``module``'s text as ``directory/name.mlir``; None (and one warning
    line) where it cannot be written."""
    path = directory / f"{name}.mlir"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(module_text(module))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        log.warning("mirage: cannot write %s: %s", path, e.strerror or e)
        return None
    return path
