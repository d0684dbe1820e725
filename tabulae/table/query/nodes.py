"""The `$filter` syntax tree: small frozen values shared by the parser, evaluator and planner.

Nodes are plain data so that a parsed filter can be compared, hashed, rendered back to text and
compiled without any reference to the text it came from. Operands keep the order the client
wrote them in (``'a' lt RowKey`` stays literal-first); consumers normalise with ``oriented``.

Invariant for every tree the parser returns: at most ``MAX_DEPTH`` levels and at most
``MAX_COMPARISONS`` comparisons, so recursive consumers never exhaust the Python stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabulae.model import edm

EQ, NE, GT, GE, LT, LE = "eq", "ne", "gt", "ge", "lt", "le"
REL_OPS = frozenset({EQ, NE, GT, GE, LT, LE})
# The operator that keeps a comparison's meaning when its operands swap sides.
FLIPPED = {EQ: EQ, NE: NE, GT: LT, GE: LE, LT: GT, LE: GE}

NULL = "Null"  # the edm_type of the ``null`` literal (not an Edm type a property can have)

MAX_DEPTH = 100
MAX_COMPARISONS = 15

PARTITION_KEY = "PartitionKey"
ROW_KEY = "RowKey"
TIMESTAMP = "Timestamp"
TABLE_NAME = "TableName"


@dataclass(frozen=True, slots=True)
class Property:
    """A property reference; on its own (a boolean term) it means ``name eq true``."""

    name: str


@dataclass(frozen=True, slots=True)
class Literal:
    """A typed constant; ``value`` is typed as in ``tabulae.model.edm`` (``None`` for ``null``).

    As a node of its own only ``true``/``false`` occur: the constant filters Storage Explorer sends.
    """

    edm_type: str
    value: Any


Operand = Property | Literal


@dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right``; exactly one operand is a Property (the parser enforces it)."""

    op: str
    left: Operand
    right: Operand

    def oriented(self) -> tuple[str, str, Literal]:
        """``(property name, op, literal)`` with the property on the left, the op flipped if needed."""
        if isinstance(self.left, Property):
            assert isinstance(self.right, Literal)
            return self.left.name, self.op, self.right
        assert isinstance(self.right, Property)
        return self.right.name, FLIPPED[self.op], self.left


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


Node = Comparison | And | Or | Not | Property | Literal

TRUE = Literal(edm.BOOLEAN, True)
FALSE = Literal(edm.BOOLEAN, False)


def depth(node: Node) -> int:
    """Levels in the tree; a leaf (comparison or term) is 1."""
    if isinstance(node, And | Or):
        return 1 + max(depth(node.left), depth(node.right))
    if isinstance(node, Not):
        return 1 + depth(node.operand)
    return 1


def comparison_count(node: Node) -> int:
    """Discrete comparisons as the service counts them: a bare boolean property is ``X eq true``."""
    if isinstance(node, And | Or):
        return comparison_count(node.left) + comparison_count(node.right)
    if isinstance(node, Not):
        return comparison_count(node.operand)
    return 1 if isinstance(node, Comparison | Property) else 0


def property_names(node: Node) -> set[str]:
    """Every property the filter references."""
    if isinstance(node, And | Or):
        return property_names(node.left) | property_names(node.right)
    if isinstance(node, Not):
        return property_names(node.operand)
    if isinstance(node, Property):
        return {node.name}
    if isinstance(node, Comparison):
        return {node.oriented()[0]}
    return set()


def conjuncts(node: Node) -> list[Node]:
    """The operands of a top-level chain of ``and`` (the node itself when it is not an And)."""
    out: list[Node] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, And):
            stack.append(item.right)
            stack.append(item.left)
        else:
            out.append(item)
    return out


def all_of(nodes: list[Node]) -> Node | None:
    """Rebuild a left-associative ``and`` chain (as the parser builds one); ``None`` when empty."""
    if not nodes:
        return None
    result = nodes[0]
    for node in nodes[1:]:
        result = And(result, node)
    return result
