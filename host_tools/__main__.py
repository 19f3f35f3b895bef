"""``python -m edgesynth``: the same as the ``edgesynth`` command."""
from edgesynth.cli import main

main(prog_name="edgesynth")
