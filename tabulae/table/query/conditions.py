"""A `$filter` residual in storage's terms: the tree a store may run in its own SQL.

Storage never sees ``$filter`` syntax (nodes, operand order, bare boolean terms); it gets a
:class:`~tabulae.storage.scans.Condition` with the same meaning: comparisons with the property
on the left, ``X`` written as ``X eq true``, constants as ``bool`` and chains of ``and``/``or``
flattened. The evaluator (:mod:`.evaluate`) and a store's translation must agree on every row;
``tests/storage/test_pushdown.py`` checks that they do.
"""

from __future__ import annotations

from tabulae.model import edm
from tabulae.storage.scans import AllOf, AnyOf, Condition, Negation, PropertyTest
from tabulae.table.query.nodes import And, Comparison, Literal, Node, Not, Or, Property

__all__ = ["to_condition"]


def to_condition(node: Node) -> Condition:
    """The storage condition of a parsed filter (its depth is bounded by the parser)."""
    if isinstance(node, Comparison):
        name, op, literal = node.oriented()
        return PropertyTest(name, op, literal.edm_type, literal.value)
    if isinstance(node, Property):
        return PropertyTest(node.name, "eq", edm.BOOLEAN, True)
    if isinstance(node, Literal):
        return bool(node.value)
    if isinstance(node, Not):
        return Negation(to_condition(node.operand))
    if isinstance(node, And | Or):
        kind = type(node)
        parts: list[Condition] = []
        stack: list[Node] = [node]
        while stack:
            item = stack.pop()
            if type(item) is kind:
                assert isinstance(item, And | Or)
                stack.append(item.right)
                stack.append(item.left)
            else:
                parts.append(to_condition(item))
        return AllOf(tuple(parts)) if kind is And else AnyOf(tuple(parts))
    raise TypeError(f"not a filter node: {node!r}")
