"""Runnable examples of the design guide's patterns and anti-patterns, for ``tabulae examples``.

One module per pattern: its docstring states the problem, the design and the trade-off; its
``run(ex)`` does the pattern against a live server through Microsoft's SDKs and asserts what it
claims with the costs the server reports (see :mod:`tabulae.examples.harness`).
``catalogue`` lists them, ``runner`` and ``report`` run and show them. They work against any
endpoint that answers like Tabulae (the cost headers and ``/metrics`` are Tabulae's).

They need the SDKs: ``pip install 'tabulae[examples]'``.
"""
