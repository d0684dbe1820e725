"""``python -m tabulae`` runs the command line."""

from tabulae.cli import main

main()
