"""`python -m harness <subcommand> --help`."""

from harness.cli import main
from runrecord.cli_dispatch import exit_with

exit_with(main)
