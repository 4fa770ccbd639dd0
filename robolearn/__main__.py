"""``python -m robolearn`` runs the ``robolearn`` command."""

from robolearn.cli import main

main()
