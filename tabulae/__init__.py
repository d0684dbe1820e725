"""Tabulae: a self-hosted Azure Table Storage server."""

__version__ = "0.1.0"
