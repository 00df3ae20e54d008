"""The ``semsearch`` command: one module per command family, each command parsing its request, running it on
the application (the operation table's entry) and printing the result."""

from semsearch.faces.cli.main import COMMANDS as COMMANDS
from semsearch.faces.cli.main import Group as Group
from semsearch.faces.cli.main import cli as cli
from semsearch.faces.cli.main import main as main
