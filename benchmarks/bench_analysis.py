"""Analysis benchmark vs rliable: see analysis/bench.py (same as `python -m analysis.bench`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
