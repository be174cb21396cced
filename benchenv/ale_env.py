"""The ALE backend: ale-py's `AtariVectorEnv` behind EnvPool's semantics.

ale-py ships wheels for Linux, macOS and Windows with the ROMs inside, so this backend
trains wherever Python runs. Its vector env is a port of EnvPool's design; where the two
differ and the difference can be set, this adapter gives EnvPool's behaviour, so the
actors, the records and the learner see one interface (benchenv.make_env):

| | ALE asked for | what the adapter returns (EnvPool's way) |
|---|---|---|
| frame stack | one frame per step (`stack_num=1`) | a stack of 4 padded with the reset frame, not zeros |
| rewards | unclipped int32 | float32, sign-clipped when the protocol clips; raw in info["reward"] |
| episode limit | in frames: max_episode_steps x frame_skip | truncated at the limit even when the game ends on that step |
| seeding | at the first reset (`reset(seed=array)`) | at make, env i with its own seed |
| info | env_id, lives, frame_number, ... | + reward, terminated, elapsed_step |

What cannot be set alike (the order of FIRE and the random no-ops at a reset, the stale
frame a game leaves when it ends inside a frame skip) is in docs/cleanba.md.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

ALE_KWARGS = ("repeat_action_probability", "full_action_space", "noop_max", "episodic_life",
              "img_height", "img_width", "stack_num", "frame_skip", "gray_scale",
              "max_episode_steps", "reward_clip")
"""The protocol keys (EnvPool's names) this adapter understands; any other is refused."""


@functools.cache
def rom_ids() -> dict[str, str]:
    """EnvPool-style Atari env id -> ALE ROM name ('Breakout-v5' -> 'breakout')."""
    from ale_py import roms

    return {"".join(p.capitalize() for p in rom.split("_")) + "-v5": rom
            for rom in roms.get_all_rom_ids()}


def default_threads(num_envs: int) -> int:
    """EnvPool's default worker count (min(envs, processors)); ALE gets the same."""
    return max(1, min(num_envs, os.cpu_count() or 1))


class AleVectorEnv:
    """`num_envs` Atari games of one ROM stepped by ale-py's threaded vector env, with the
    gymnasium vector API (reset, step, close) and EnvPool's semantics (module docstring).

    Env i gets seeds[i]; the envs are seeded at the first reset, as EnvPool seeds them at
    construction (a later reset() continues their streams).
    """

    def __init__(self, env_id: str, num_envs: int, seeds: list[int], protocol: dict[str, Any],
                 num_threads: int | None = None):
        from ale_py.vector_env import AtariVectorEnv

        unknown = sorted(set(protocol) - set(ALE_KWARGS))
        if unknown:
            raise ValueError(f"the ALE backend does not take {unknown}; it takes {ALE_KWARGS}")
        if not protocol.get("gray_scale", True):
            raise ValueError("the ALE backend stacks grey frames only (gray_scale=True)")
        self.num_envs = num_envs
        self.stack_num = int(protocol.get("stack_num", 4))
        self.max_episode_steps = int(protocol.get("max_episode_steps", 27000))
        self.reward_clip = bool(protocol.get("reward_clip", False))
        frame_skip = int(protocol.get("frame_skip", 4))
        self._env = AtariVectorEnv(
            rom_ids()[env_id], num_envs,
            num_threads=num_threads or default_threads(num_envs),
            # ALE counts frames: every step but a game's last runs frame_skip of them, so
            # ALE ends an episode at the same agent step as EnvPool's step limit
            max_num_frames_per_episode=self.max_episode_steps * frame_skip,
            repeat_action_probability=float(protocol.get("repeat_action_probability", 0.25)),
            full_action_space=bool(protocol.get("full_action_space", True)),
            img_height=int(protocol.get("img_height", 84)),
            img_width=int(protocol.get("img_width", 84)),
            grayscale=True, stack_num=1, frameskip=frame_skip, maxpool=True,
            noop_max=int(protocol.get("noop_max", 30)),
            episodic_life=bool(protocol.get("episodic_life", False)),
            reward_clipping=False, use_fire_reset=True, autoreset_mode="NextStep",
        )
        self._seeds = np.asarray(seeds, dtype=np.int64)
        self._seeded = False
        h, w = int(protocol.get("img_height", 84)), int(protocol.get("img_width", 84))
        self._stack = np.zeros((num_envs, self.stack_num, h, w), np.uint8)
        self._elapsed = np.zeros(num_envs, np.int32)
        self._resetting = np.zeros(num_envs, bool)  # the next step returns a reset frame
        self.single_observation_space = self._stack.shape[1:]
        self.single_action_space = self._env.single_action_space
        self.action_space = self.single_action_space  # as EnvPool's gymnasium envs give it

    def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        seed = None if self._seeded else self._seeds
        self._seeded = True
        frames, info = self._env.reset(seed=seed)
        frames = self._in_env_order(frames, info)
        self._stack[:] = frames[:, -1:]  # every slot: the reset frame
        self._elapsed[:] = 0
        self._resetting[:] = False
        zeros = np.zeros(self.num_envs, np.float32)
        return self._stack.copy(), self._info(info, zeros, np.zeros(self.num_envs, bool))

    def step(self, actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        actions = np.ascontiguousarray(actions, dtype=np.int32).reshape(self.num_envs)
        frames, reward, terminated, truncated, info = self._env.step(actions)
        order = self._order(info)
        if order is not None:
            frames, reward, terminated, truncated = (x[order] for x in
                                                     (frames, reward, terminated, truncated))
            info = {k: np.asarray(v)[order] for k, v in info.items()}
        reset = self._resetting
        # the stack: the newest frame last; a reset step fills every slot with its frame
        self._stack[:, :-1] = self._stack[:, 1:]
        self._stack[:, -1] = frames[:, -1]
        self._stack[reset] = frames[reset, -1:]
        self._elapsed = np.where(reset, 0, self._elapsed + 1).astype(np.int32)
        game_over = np.asarray(terminated, bool)
        done = game_over | np.asarray(truncated, bool)
        # EnvPool: truncated whenever the step limit is reached, even on a game over
        # (ALE calls a game over on the last step terminated)
        trunc = done & (self._elapsed >= self.max_episode_steps)
        term = done & ~trunc
        raw = np.asarray(reward, np.float32)
        clipped = np.sign(raw).astype(np.float32) if self.reward_clip else raw.copy()
        self._resetting = done
        out_info = self._info(info, raw, game_over)
        return self._stack.copy(), clipped, term, trunc, out_info

    def _info(self, info: dict[str, Any], raw: np.ndarray, game_over: np.ndarray,
              ) -> dict[str, np.ndarray]:
        return {
            "env_id": np.asarray(info.get("env_id", np.arange(self.num_envs)), np.int32),
            "lives": np.asarray(info["lives"], np.int32),
            "reward": raw,
            "terminated": game_over.astype(np.int32),
            "elapsed_step": self._elapsed.copy(),
            "frame_number": np.asarray(info.get("frame_number", 0), np.int64),
            "episode_frame_number": np.asarray(info.get("episode_frame_number", 0), np.int64),
        }

    @staticmethod
    def _order(info: dict[str, Any]) -> np.ndarray | None:
        """The permutation to env order when ALE answered out of order (None: in order)."""
        ids = np.asarray(info.get("env_id", []))
        if ids.size == 0 or np.all(ids[1:] > ids[:-1]):
            return None
        return np.argsort(ids, kind="stable")

    def _in_env_order(self, frames: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        order = self._order(info)
        return frames if order is None else frames[order]

    def close(self) -> None:
        self._env.close()


@functools.cache
def action_count(env_id: str, full_action_space: bool) -> int:
    """Actions of `env_id` (18 with the full action space; else the game's minimal set,
    read from the ROM)."""
    if full_action_space:
        return 18
    import ale_py
    from ale_py import roms

    path = roms.get_rom_path(rom_ids()[env_id])
    if path is None:
        raise ValueError(f"ale-py has no ROM for {env_id}")
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(path)
    return len(ale.getMinimalActionSet())
