"""Tabulae in a test suite: :func:`serve` for unittest and scripts, and a pytest plugin
(:mod:`tabulae.testing.pytest_plugin`, registered as ``tabulae``) with fixtures for a server, its
connection string and ready SDK clients.

Nothing here imports the server: it is started as a process and reached over HTTP, as the code
under test will reach Azure.
"""

from tabulae.testing.server import ServerError, TabulaeServer, serve, start

__all__ = ["ServerError", "TabulaeServer", "serve", "start"]
