"""Graphviz pictures of µGraphs: ``mirage-opt -t dot``.

Each ``func.func`` becomes a cluster holding its inputs, its kernel ops and its
results. A ``kernel.customized`` op is drawn as a nested cluster whose label
gives its grid, block and for-loop range; inside it the block graph's ops
appear with their partition maps (``imap``/``fmap`` on inputs, ``omap`` on
outputs), and each ``block.thread_graph`` is a cluster again, one level
deeper. Every op node shows its result shapes and its properties, read
generically from the op, so new ops need no drawing code.

Edges follow SSA values. A value entering a nested graph goes to the region
argument that stands for it; a result of a nested graph comes from the op that
defines it there (the i-th ``block.output``, or ``thread.yield``).

``-t dot{format=svg}`` pipes the DOT text through Graphviz's ``dot`` program;
``tools/render_dot.py`` writes PNG or SVG files.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.utils.target import Target

from mirage_xdsl.ir.diagnostics import MirageError

FORMATS = ("dot", "svg", "png")

STYLE = {
    "func": 'style="rounded"; color="gray40";',
    "kernel.customized": 'style="filled"; fillcolor="#eef3fb"; color="#4a6fa5";',
    "block.thread_graph": 'style="filled"; fillcolor="#fbf3e6"; color="#b07d2b";',
}
"""Cluster styles by the op that owns the region."""

INPUT_NODE = 'shape=ellipse, style="filled", fillcolor="#e8f4e8"'
OUTPUT_NODE = 'shape=ellipse, style="filled", fillcolor="#f9e3e3"'


def type_label(ty: Attribute) -> str:
    """``tensor<2x64xf16>`` -> ``2x64xf16``."""
    if isinstance(ty, TensorType):
        dims = "x".join(str(d) for d in ty.get_shape())
        return f"{dims}x{ty.element_type}"
    return str(ty)


def attr_label(attr: Attribute) -> str:
    if isinstance(attr, DenseArrayBase):
        return str(list(attr.get_values()))
    if isinstance(attr, IntegerAttr):
        return str(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, ArrayAttr):
        return "[" + ", ".join(attr_label(a) for a in attr.data) + "]"
    return str(attr)


def properties_label(op: Operation) -> str:
    """``imap [1, -1, 0]  fmap -1``: every property, in declaration order."""
    return "  ".join(f"{k} {attr_label(v)}" for k, v in op.properties.items())


def quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n") + '"'


@dataclass
class DotWriter:
    """Writes one module as a DOT digraph; ids are assigned as ops are drawn."""

    lines: list[str]
    ids: dict[object, str]
    edges: list[tuple[str, str]]

    @staticmethod
    def draw(module: ModuleOp, name: str = "mugraph") -> str:
        writer = DotWriter([], {}, [])
        return writer._module(module, name)

    def _id(self, key: object, prefix: str) -> str:
        if key not in self.ids:
            self.ids[key] = f"{prefix}{len(self.ids)}"
        return self.ids[key]

    def _module(self, module: ModuleOp, name: str) -> str:
        self.lines += [
            f"digraph {quote(name)} {{",
            "  compound=true;",
            "  rankdir=TB;",
            '  graph [fontname="Helvetica", fontsize=11];',
            '  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];',
            '  edge [fontname="Helvetica", fontsize=9];',
        ]
        for op in module.ops:
            if isinstance(op, func.FuncOp):
                self._function(op)
        self.lines += [f"  {a} -> {b};" for a, b in self.edges]
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _function(self, fn: func.FuncOp) -> None:
        indent = "  "
        cluster = self._id(fn, "cluster_")
        self.lines.append(f"{indent}subgraph {cluster} {{")
        self.lines.append(f"{indent}  label={quote('func @' + fn.sym_name.data)};")
        self.lines.append(f"{indent}  {STYLE['func']}")
        for i, arg in enumerate(fn.body.block.args):
            label = f"input {i}\n{type_label(arg.type)}"
            self._node(arg, f"{label}", INPUT_NODE, indent + "  ")
        self._block(fn.body.block, indent + "  ")
        self.lines.append(f"{indent}}}")

    def _block(self, block: Block, indent: str) -> None:
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                for i, v in enumerate(op.operands):
                    out = self._id((op, i), "n")
                    label = f"output {i}\n{type_label(v.type)}"
                    self.lines.append(
                        f"{indent}{out} [label={quote(label)}, {OUTPUT_NODE}];"
                    )
                    self.edges.append((self.source(v), out))
            elif op.regions:
                self._cluster(op, indent)
            else:
                self._op(op, indent)

    def _node(self, key: object, label: str, style: str, indent: str) -> str:
        node = self._id(key, "n")
        self.lines.append(f"{indent}{node} [label={quote(label)}, {style}];")
        return node

    def _op(self, op: Operation, indent: str) -> None:
        parts = [op.name]
        props = properties_label(op)
        if props:
            parts.append(props)
        parts += [type_label(r.type) for r in op.results]
        if not op.results and op.operands:
            parts.append(type_label(op.operands[0].type))
        node = self._id(op, "n")
        self.lines.append(f"{indent}{node} [label={quote(chr(10).join(parts))}];")
        for v in op.operands:
            self.edges.append((self.source(v), node))

    def _cluster(self, op: Operation, indent: str) -> None:
        """A region op: its region is a nested graph; operands feed its arguments."""
        cluster = self._id(op, "cluster_")
        label = op.name + ("\n" + properties_label(op) if op.properties else "")
        self.lines.append(f"{indent}subgraph {cluster} {{")
        self.lines.append(f"{indent}  label={quote(label)};")
        self.lines.append(f"{indent}  {STYLE.get(op.name, 'style=rounded;')}")
        body = op.regions[0].block
        for i, (arg, operand) in enumerate(zip(body.args, op.operands, strict=True)):
            label = f"arg {i}\n{type_label(arg.type)}"
            node = self._node(arg, label, "shape=ellipse", indent + "  ")
            self.edges.append((self.source(operand), node))
        self._block(body, indent + "  ")
        self.lines.append(f"{indent}}}")

    def source(self, value: SSAValue) -> str:
        """The node a value's edges start from."""
        if isinstance(value, BlockArgument):
            return self.ids[value]
        op = value.owner
        assert isinstance(op, Operation)
        if not op.regions:
            return self.ids[op]
        return self.ids[result_definer(op, value.index)]  # type: ignore[attr-defined]


def result_definer(op: Operation, index: int) -> Operation:
    """The op inside a region op that defines its ``index``-th result.

    ``kernel.customized`` results are its ``block.output`` ops in order; a
    ``block.thread_graph`` returns what its terminator yields.
    """
    block = op.regions[0].block
    outputs = [o for o in block.ops if o.name == "block.output"]
    if outputs:
        return outputs[index]
    last = block.last_op
    assert last is not None
    return last


def to_dot(module: ModuleOp, name: str = "mugraph") -> str:
    """The module's µGraphs as one DOT digraph."""
    return DotWriter.draw(module, name)


def render(dot_text: str, fmt: str) -> bytes:
    """Run Graphviz's ``dot`` to turn DOT text into ``svg`` or ``png`` bytes."""
    if fmt not in FORMATS[1:]:
        raise MirageError(f"error: unknown picture format '{fmt}' (svg or png)")
    dot = shutil.which("dot")
    if dot is None:
        raise MirageError(
            f"error: rendering {fmt} needs Graphviz's 'dot' program "
            "(apt install graphviz); '-t dot' alone writes DOT text"
        )
    done = subprocess.run(
        [dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True
    )
    if done.returncode != 0:
        raise MirageError(f"error: dot failed: {done.stderr.decode().strip()}")
    return done.stdout


@dataclass(frozen=True)
class DotTarget(Target):
    """``-t dot``: Graphviz DOT text; ``-t dot{format=svg}`` renders SVG."""

    name = "dot"

    format: str = "dot"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        if self.format not in ("dot", "svg"):
            raise MirageError(
                f"error: target 'dot' option format must be dot or svg, got "
                f"'{self.format}' (PNG is binary: use tools/render_dot.py)"
            )
        text = to_dot(module)
        output.write(text if self.format == "dot" else render(text, "svg").decode())
