"""One harness config -> each baseline's own command-line flags (pure functions, no I/O).

The harness describes an IMPALA run with one set of names (those of our trainers'
configs: `num_envs`, `num_steps`, `ent_coef`, ...). Each baseline spells the same
settings its own way: monobeast as argparse flags, moolib as Hydra overrides of
examples/vtrace/config.yaml. The tables below are the whole translation; docs/baselines.md
prints them, and tests/test_baselines_mapping.py checks each row.

Keys an adapter implements itself (not a flag of the baseline): `seed` (env seeds and
torch seeds, which neither baseline offers) and `learner_delay_s` (a sleep added to each
learner update).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class MappingError(ValueError):
    """A harness config the baselines cannot express."""


@dataclass(frozen=True)
class Rule:
    """One harness key and how it becomes the baseline's setting."""

    key: str
    target: str  # the baseline's flag / config key ("" when the adapter implements it)
    render: Callable[[Any], list[str]]  # value -> argv items (monobeast) or overrides (moolib)
    note: str = ""


def _flag(name: str, cast: Callable[[Any], Any]) -> Callable[[Any], list[str]]:
    return lambda v: [name, repr(cast(v)) if cast is float else str(cast(v))]


def _override(name: str, cast: Callable[[Any], Any]) -> Callable[[Any], list[str]]:
    return lambda v: [f"{name}={repr(cast(v)) if cast is float else cast(v)}"]


def _adapter_only(_: Any) -> list[str]:
    return []


# Defaults are each baseline's own, so that `python -m baselines.monobeast --env-id X`
# runs stock monobeast (and likewise moolib) on the shared env protocol, except for
# monobeast's network: the paper ran every agent with IMPALA's ResNet, so that is the default.
MONOBEAST_NETWORKS: tuple[str, ...] = ("impala-resnet", "atarinet")
MONOBEAST_DEFAULTS: dict[str, Any] = {
    "env_id": "Breakout-v5",
    "seed": 1,
    "total_timesteps": 100_000,
    "num_envs": 4,
    "num_steps": 80,
    "batch_size": 8,
    "learning_rate": 0.00048,
    "learner_delay_s": 0.0,
    "gamma": 0.99,
    "ent_coef": 0.0006,
    "vf_coef": 0.5,
    "max_grad_norm": 40.0,
    "num_learner_threads": 2,
    "num_buffers": None,
    "use_cuda": True,
    "network": "impala-resnet",
}

MONOBEAST_TABLE: tuple[Rule, ...] = (
    Rule("env_id", "--env", _flag("--env", str), "recorded by monobeast only; the env is EnvPool's"),
    Rule("seed", "", _adapter_only, "adapter: actor i runs global env i (benchenv.env_seeds); torch seeded"),
    Rule("total_timesteps", "--total_steps", _flag("--total_steps", int), "agent steps"),
    Rule("num_envs", "--num_actors", _flag("--num_actors", int), "one env per actor process"),
    Rule("num_steps", "--unroll_length", _flag("--unroll_length", int)),
    Rule("batch_size", "--batch_size", _flag("--batch_size", int), "trajectories per update"),
    Rule("learning_rate", "--learning_rate", _flag("--learning_rate", float), "RMSprop, linear decay"),
    Rule("learner_delay_s", "", _adapter_only, "adapter: sleep inside each learn()"),
    Rule("gamma", "--discounting", _flag("--discounting", float)),
    Rule("ent_coef", "--entropy_cost", _flag("--entropy_cost", float)),
    Rule("vf_coef", "--baseline_cost", _flag("--baseline_cost", float)),
    Rule("max_grad_norm", "--grad_norm_clipping", _flag("--grad_norm_clipping", float)),
    Rule(
        "num_learner_threads",
        "--num_learner_threads",
        _flag("--num_learner_threads", int),
    ),
    Rule(
        "num_buffers",
        "--num_buffers",
        lambda v: [] if v is None else ["--num_buffers", str(int(v))],
        "None: monobeast's max(2 x actors, batch_size)",
    ),
    Rule(
        "use_cuda",
        "--disable_cuda",
        lambda v: [] if v else ["--disable_cuda"],
        "False adds --disable_cuda (monobeast uses CUDA only when torch sees a GPU)",
    ),
    Rule(
        "network",
        "",
        _adapter_only,
        "adapter: `impala-resnet` = cleanba's IMPALA ResNet (16-32-32, 256) in PyTorch "
        "(baselines/torch_resnet.py); `atarinet` = monobeast's stock AtariNet (Nature CNN)",
    ),
)
# Always passed: train mode, monobeast's own reward clipping (the env gives raw rewards),
# and no model.tar (the record keeps logs, not checkpoints).
MONOBEAST_FIXED: tuple[str, ...] = ("--mode", "train", "--reward_clipping", "abs_one", "--disable_checkpoint")

# The paper's Section 3 monobeast settings: control, and the same with a slower learner.
SECTION3_MONOBEAST: dict[str, dict[str, Any]] = {
    "control": {"batch_size": 8, "num_envs": 80, "num_steps": 240, "learner_delay_s": 0.0},
    "experiment": {"batch_size": 8, "num_envs": 80, "num_steps": 240, "learner_delay_s": 1.0},
}


MOOLIB_DEFAULTS: dict[str, Any] = {
    "env_id": "Breakout-v5",
    "seed": 1,
    "total_timesteps": 50_000_000,
    "num_envs": 256,
    "num_actor_batches": 2,
    "num_actor_cpus": 10,
    "num_steps": 20,
    "batch_size": 32,
    "learning_rate": 0.0006,
    "learner_delay_s": 0.0,
    "gamma": 0.99,
    "ent_coef": 0.0006,
    "vf_coef": 0.5,
    "max_grad_norm": 40.0,
    "reward_clip": 1.0,
    "use_cuda": True,
}


def moolib_env_name(env_id: str) -> str:
    """EnvPool `Breakout-v5` -> ALE `ALE/Breakout-v5` (moolib's env.name spelling)."""
    return env_id if env_id.startswith("ALE/") else f"ALE/{env_id}"


MOOLIB_TABLE: tuple[Rule, ...] = (
    Rule("env_id", "env.name", lambda v: [f"env.name={moolib_env_name(str(v))}"],
         "recorded by moolib only; the env is EnvPool's"),
    Rule("seed", "", _adapter_only, "adapter: k-th env created runs global env k (benchenv.env_seeds); torch seeded"),
    Rule("total_timesteps", "total_steps", _override("total_steps", int), "agent steps"),
    Rule("num_envs", "actor_batch_size", _adapter_only,
         "actor_batch_size = num_envs / num_actor_batches"),
    Rule("num_actor_batches", "num_actor_batches", _override("num_actor_batches", int),
         "env batches stepped alternately"),
    Rule("num_actor_cpus", "num_actor_cpus", _override("num_actor_cpus", int),
         "env worker processes"),
    Rule("num_steps", "unroll_length", _override("unroll_length", int)),
    Rule("batch_size", "batch_size", lambda v: [f"batch_size={int(v)}", f"virtual_batch_size={int(v)}"],
         "also virtual_batch_size: one optimizer step per batch"),
    Rule("learning_rate", "optimizer.learning_rate", _override("optimizer.learning_rate", float),
         "Adam, linear decay"),
    Rule("learner_delay_s", "", _adapter_only, "adapter: sleep before each optimizer step"),
    Rule("gamma", "discounting", _override("discounting", float)),
    Rule("ent_coef", "entropy_cost", _override("entropy_cost", float)),
    Rule("vf_coef", "baseline_cost", _override("baseline_cost", float)),
    Rule("max_grad_norm", "grad_norm_clipping", _override("grad_norm_clipping", float)),
    Rule("reward_clip", "reward_clip", _override("reward_clip", float), "moolib clips rewards itself"),
    Rule("use_cuda", "device", lambda v: ["device=cuda:0" if v else "device=cpu"],
         "True: cuda:0 (the adapter passes False when torch sees no GPU)"),
)
# Always passed: the shared Atari protocol in moolib's own env keys (for its logged config;
# the env itself is replaced by EnvPool's), no LSTM, no wandb.
MOOLIB_FIXED: tuple[str, ...] = (
    "env.repeat_action_probability=0.25",
    "env.num_action_repeats=4",
    "env.noop_max=1",
    "use_lstm=false",
    "wandb=false",
)


def resolve(config: Mapping[str, Any], defaults: Mapping[str, Any], system: str) -> dict[str, Any]:
    """`config` completed with `defaults`; unknown keys are an error naming the valid ones."""
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise MappingError(
            f"{system}: unknown config keys {unknown}; valid keys: {sorted(defaults)}"
        )
    out = dict(defaults)
    out.update(config)
    return out


def _render(table: tuple[Rule, ...], config: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for rule in table:
        out += rule.render(config[rule.key])
    return out


def monobeast_argv(config: Mapping[str, Any], savedir: str, xpid: str) -> list[str]:
    """The monobeast argv for a harness config (`--savedir/--xpid` place its native logs)."""
    c = resolve(config, MONOBEAST_DEFAULTS, "monobeast-impala")
    for key in ("num_envs", "num_steps", "batch_size", "total_timesteps", "num_learner_threads"):
        if int(c[key]) < 1:
            raise MappingError(f"monobeast-impala: {key} must be >= 1, got {c[key]}")
    if c["network"] not in MONOBEAST_NETWORKS:
        raise MappingError(
            f"monobeast-impala: network {c['network']!r} is not one of {list(MONOBEAST_NETWORKS)}"
        )
    num_buffers = c["num_buffers"]
    effective = max(2 * int(c["num_envs"]), int(c["batch_size"])) if num_buffers is None else num_buffers
    if effective <= int(c["num_envs"]) or effective < int(c["batch_size"]):
        raise MappingError(
            f"monobeast-impala: num_buffers={effective} must be > num_envs ({c['num_envs']}) "
            f"and >= batch_size ({c['batch_size']}); leave it unset for monobeast's default"
        )
    return _render(MONOBEAST_TABLE, c) + list(MONOBEAST_FIXED) + ["--savedir", savedir, "--xpid", xpid]


def moolib_actor_batch_size(num_envs: int, num_actor_batches: int) -> int:
    if num_actor_batches < 1 or num_envs < 1 or num_envs % num_actor_batches:
        raise MappingError(
            f"moolib-impala: num_envs ({num_envs}) must be a positive multiple of "
            f"num_actor_batches ({num_actor_batches}): moolib steps num_actor_batches "
            "batches of num_envs / num_actor_batches envs"
        )
    return num_envs // num_actor_batches


def moolib_overrides(
    config: Mapping[str, Any], connect: str, savedir: str, project: str, group: str,
    local_name: str = "peer0",
) -> list[str]:
    """Hydra overrides of moolib's examples/vtrace/config.yaml for a harness config."""
    c = resolve(config, MOOLIB_DEFAULTS, "moolib-impala")
    for key in ("num_steps", "batch_size", "total_timesteps", "num_actor_cpus"):
        if int(c[key]) < 1:
            raise MappingError(f"moolib-impala: {key} must be >= 1, got {c[key]}")
    actor_batch_size = moolib_actor_batch_size(int(c["num_envs"]), int(c["num_actor_batches"]))
    return (
        _render(MOOLIB_TABLE, c)
        + [f"actor_batch_size={actor_batch_size}"]
        + list(MOOLIB_FIXED)
        + [
            f"connect={connect}",
            f"savedir={savedir}",
            f"project={project}",
            f"group={group}",
            f"local_name={local_name}",
        ]
    )


def table_markdown(table: tuple[Rule, ...], defaults: Mapping[str, Any]) -> str:
    """The rows of a mapping table as Markdown (docs/baselines.md shows exactly this)."""
    lines = ["| harness key | default | baseline setting | note |", "|---|---|---|---|"]
    for r in table:
        target = f"`{r.target}`" if r.target else "(adapter)"
        lines.append(f"| `{r.key}` | `{defaults[r.key]!r}` | {target} | {r.note} |")
    return "\n".join(lines)
