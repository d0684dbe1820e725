"""The examples, in the order the design guide presents them: name → module.

Each pattern module has a docstring (the problem, the design, the trade-off), a ``TITLE`` and a
``run(ex)`` function taking a :class:`tabulae.examples.harness.Example`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from tabulae.examples.harness import Example

__all__ = ["EXAMPLES", "Entry"]

_MODULES = {
    "intra-partition-index": "intra_partition_index",
    "inter-partition-index": "inter_partition_index",
    "eventually-consistent": "eventually_consistent",
    "index-entities": "index_entities",
    "denormalisation": "denormalisation",
    "compound-key": "compound_key",
    "log-tail": "log_tail",
    "high-volume-delete": "high_volume_delete",
    "data-series": "data_series",
    "wide-entities": "wide_entities",
    "large-entities": "large_entities",
    "one-to-many": "one_to_many",
    "prepend-append": "prepend_append",
    "hot-partition": "hot_partition",
    "log-data": "log_data",
    "retry": "retry",
    "optimistic-concurrency": "optimistic_concurrency",
    "continuation": "continuation",
}


@dataclass(frozen=True)
class Entry:
    """One example: its module, one-line title, explanation and run function."""

    name: str
    module: str
    title: str
    explanation: tuple[str, ...]
    run: Callable[[Example], None]


def _explanation(module: ModuleType) -> tuple[str, ...]:
    """The module docstring after its first line (the problem, the design, the trade-off), one
    paragraph a line, for the Markdown page."""
    paragraphs = (module.__doc__ or "").strip().split("\n\n")[1:]
    return tuple(" ".join(p.split()) for p in paragraphs)


def _load() -> dict[str, Entry]:
    entries = {}
    for name, module_name in _MODULES.items():
        module = importlib.import_module(f"tabulae.examples.{module_name}")
        entries[name] = Entry(name, module.__name__, module.TITLE, _explanation(module), module.run)
    return entries


EXAMPLES: dict[str, Entry] = _load()
