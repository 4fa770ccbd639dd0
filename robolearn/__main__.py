"""``python -m robolearn`` runs the ``robolearn`` command."""

from robolearn.cli.main import main

main()
