"""Runnable examples of the design guide's patterns, each a module with a ``run(connection_string)``
function that works against Tabulae or Azure alike (they use only Microsoft's SDKs).

They need the SDKs: ``pip install 'tabulae[examples]'``.
"""
