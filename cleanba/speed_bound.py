"""`python -m cleanba.speed_bound`: actor alone, learner alone, both together, and the
together SPS as a share of min(actor, learner). The tool is cleanba/tools/speed_bound.py;
this module is only its command."""

from cleanba.tools.speed_bound import cli

if __name__ == "__main__":
    cli()
