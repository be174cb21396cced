"""`python -m analysis <subcommand> --help`."""

from analysis.cli import main
from runrecord.cli_dispatch import exit_with

exit_with(main)
