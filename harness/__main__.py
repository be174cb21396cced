import os
import sys

from harness.cli import main

# Line by line also into files and pipes, so that logs follow a long sweep as it goes.
sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
try:
    sys.exit(main())
except BrokenPipeError:  # e.g. `python -m harness plan ... | head`
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)
