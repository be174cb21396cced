"""`python -m cleanba.bench`: throughput and memory figures of the trainers. The tool is
cleanba/tools/bench.py; this module is only its command."""

from cleanba.tools.bench import cli

if __name__ == "__main__":
    cli()
