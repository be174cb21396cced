"""`python -m cleanba.determinism_check`: what bit-identity this hardware can promise. The
tool is cleanba/tools/determinism_check.py; this module is only its command."""

import sys

from cleanba.tools.determinism_check import main

if __name__ == "__main__":
    sys.exit(main())
