"""Every key a sweep file may hold, with the description that errors list (docs/harness.md).

Tables of text only: harness.sweep.checks checks files against them.
"""

MATRIX_KEYS = {
    "name": "label of this matrix (shown by plan and status)",
    "systems": "list of systems, e.g. ['cleanba-ppo', 'cleanba-impala']",
    "architectures": "list of 'sync', 'cleanba', 'async' (cleanba systems)",
    "layouts": "list of layouts in the paper's notation, e.g. ['a0-l0-d1', 'a0-l1,2,3-d1']",
    "games": "list of env ids, e.g. ['Breakout-v5'] or ['CartPole-v1']",
    "seeds": "list of integer seeds",
    "env_backends": "list of Atari backends, 'envpool', 'ale' and/or 'ale-exact' (default: "
                    "the trainers' default, envpool where installed); runs of different backends are "
                    "compared only when the report groups by env_protocol.backend",
    "frames": "frame budget per run (env steps x frame skip)",
    "preset": "trainer preset: 'auto' (atari for -v5 games, else cartpole), 'atari', 'cartpole'",
    "overrides": "table of hyperparameters passed to the trainer, e.g. {learning-rate = 3e-4}",
    "grid": "table of hyperparameters to sweep: each key a list of values (cartesian product)",
    "resources": "table: cpus_per_process, accelerator ('cpu' or 'gpu'), timeout_min",
}
TOP_KEYS = {
    "name": "sweep name (folder under the results root)",
    "description": "free text",
    "matrix": "array of tables [[matrix]], each a product of systems, layouts, games, seeds",
    "slurm": "table of Slurm job parameters (partition, gpus_per_node, ...)",
    "report": "table of report options (group_by, delta, reps, seed)",
    "regression": "table for `harness regress` (reference, delta, systems, games)",
    "adaptive": "table: run seeds in batches until the verdicts are decided (first_seeds, "
                "batch_seeds, max_seeds, alpha, spending, verdicts, reference)",
    "entry_points": "table of extra systems: name = {entry, takes_preset, architectures, baseline}",
    **{k: v for k, v in MATRIX_KEYS.items() if k != "name"},
}
RESOURCE_KEYS = {
    "cpus_per_process": "CPU cores each trainer process gets (default 1)",
    "accelerator": "'cpu' (virtual XLA devices) or 'gpu' (one GPU per layout device)",
    "timeout_min": "wall-clock limit per run in minutes (local and Slurm)",
}
SLURM_KEYS = {
    "partition": "Slurm partition",
    "account": "Slurm account",
    "qos": "Slurm QOS",
    "constraint": "Slurm constraint",
    "gpus_per_node": "GPUs per job (default: the layout's devices per process if accelerator=gpu)",
    "cpus_per_task": "CPUs per Slurm task (default: resources.cpus_per_process)",
    "mem_gb": "memory per node in GB",
    "timeout_min": "job time limit in minutes (default: resources.timeout_min + 3 min grace, or 60)",
    "array_parallelism": "how many jobs of an array run at once",
    "use_array": "submit runs as job arrays (true) or one job per run (false)",
    "setup": "list of shell lines run before the job (module load ..., source venv)",
    "additional_parameters": "table of extra sbatch parameters",
}
REPORT_KEYS = {
    "group_by": "manifest key that splits runs into compared groups (default layout.name)",
    "delta": "equivalence margin (HNS units) fixed before the runs",
    "reps": "bootstrap replicates",
    "seed": "bootstrap seed",
    "reference": "group every other group is compared with, e.g. a0-l0-d1 (default: the "
                 "smallest hardware)",
    "published": "table {table = NAME|FILE, column = NAME}: a 'Did it reproduce?' section "
                 "against that published column (docs/reproduce.md)",
    "hardware": "folder of the GPU campaign's merged records (results/hardware): a "
                "'Hardware evidence' section (benchmarks/campaign.py)",
}
PUBLISHED_KEYS = {
    "table": "a shipped published table by name, e.g. 'cleanba:main_10CPU', or a "
             "mean ± std CSV (relative to the project root)",
    "column": "its column, e.g. 'Cleanba IMPALA, 1 A100, 10 CPU'",
    "relative_margin": "per-game margin as a share of the published HNS (default 0.25)",
    "absolute_margin": "smallest per-game margin in HNS (default 0.1)",
    "allow_budget_mismatch": "compare runs shorter than the paper's 200M frames (true/false)",
    "allow_protocol_mismatch": "compare runs made under another env protocol (true/false)",
}
REGRESSION_KEYS = {
    "metric": "per-seed value, one of analysis.verdicts.gate.GATE_METRICS: iqm (IQM over games of "
              "the final score, default), auc (IQM of the AUC) or atari5-median (docs/atari5.md)",
    "reference": "folder of reference run records (relative to the project root)",
    "delta": "allowed drop of the score (normalised units)",
    "systems": "only runs of these systems are compared",
    "games": "only runs on these games are compared",
    "layouts": "only runs on these layouts are compared (one verdict per system and layout)",
    "looks_at": "looks over training time: fractions of the frame budget, increasing, the last "
                "1.0, e.g. [0.1, 0.2, 0.3, 0.5, 0.7, 1.0] (a failing candidate is stopped at "
                "the first look that shows it)",
    "look_spending": "alpha spending over those looks: 'pocock' (default) or 'obrien-fleming'",
    "assume_equal_spread": "a side with one seed borrows the other side's spread (true/false, "
                           "default false): the gate's error rate holds only if both sides "
                           "truly share one spread (docs/analysis.md)",
    "look_correlation": "the looks' joint law: 'reference' (estimated from the reference's "
                        "curves when it has enough seeds, default) or 'union' (union bound)",
}
ADAPTIVE_KEYS = {
    "first_seeds": "seeds per side at the first look (default 3, at least 2)",
    "batch_seeds": "seeds added per side at each later look (default 2)",
    "max_seeds": "cap of seeds per side: the last look (default 9)",
    "alpha": "error rate held over all looks (default 0.05)",
    "spending": "alpha-spending function (default 'obrien-fleming'; analysis.sequential)",
    "verdicts": "verdicts to decide: 'equivalence' (layouts) and/or 'gate' (default "
                "['equivalence'])",
    "reference": "the gate's fixed reference: folder of run records (default: [regression] "
                 "reference)",
}
ENTRY_POINT_KEYS = {
    "entry": "module (pkg.mod) or path to a .py script that follows the trainer CLI contract",
    "takes_preset": "whether it takes the PRESET positional",
    "architectures": "architectures it implements",
    "baseline": "one device only, no layout or architecture flags",
}
