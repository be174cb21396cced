"""The `ale-exact` backend: one ale-py `ALEInterface` per env, stepped from Python, whose
whole state can be saved and restored exactly (`get_state`, `set_state`).

ale-py's vector env (the `ale` backend, benchenv/ale_env.py) exposes no per-env state;
the one-game interface does (cloneState with its RNG). This backend gives the Atari
protocol with EnvPool's semantics, as the other two do, computed here:
- frame skip 4, the reward summed over the skip, the observation the pixel-wise max of
  the screens after the step's last two frames (the one screen when a game ends on a
  step's first frame);
- grey 210x160 screens resized to 84x84 by area averaging (benchenv/frames.py): the
  observations are this backend's own bits, not the vector env's or EnvPool's (which
  resize with OpenCV's interpolation), so a record names its backend;
- a stack of 4, padded with the reset frame;
- sticky actions (each frame keeps the previous frame's action with probability 0.25),
  drawn here from each env's own generator, with ALE's repeat_action_probability 0: ALE
  keeps the previous action outside its saved state (cloneState leaves it out, and a
  restored game would repeat whatever action the emulator last ran), so sticky actions
  drawn by ALE cannot be restored; the full action space, no life-loss signal;
- the step limit in agent steps (truncated, even when the game ends on that step);
- EnvPool's reset order: U no-ops (U uniform on 0 .. noop_max - 1, from each env's own
  generator), then FIRE when the action set has it; the next-step autoreset (the step
  after a done returns the reset frame, reward 0, not done, elapsed_step 0).
Env i's ALE seed and its generator (no-ops and sticky actions) both come from seeds[i]
(`stream_seeds`).

The state (`get_state`) is everything the next step depends on: each emulator's state
with its RNG, each env's generator state and the action its last frame ran (the one a
sticky frame repeats), the frame stacks, the steps elapsed in each episode and which envs
reset at their next step.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from benchenv import frames, state_bytes
from benchenv.ale_env import ALE_KWARGS, rom_ids

STATE_FORMAT = 1
SCREEN_SHAPE = (210, 160)  # every Atari 2600 game's


def stream_seeds(env_seed: int) -> tuple[int, int]:
    """(ALE seed, generator seed) of an env seed: two independent words of its
    SeedSequence, the ALE one in int32 range (ALE's setInt)."""
    words = np.random.SeedSequence(env_seed).generate_state(2, np.uint32)
    return int(words[0] & 0x7FFFFFFF), int(words[1])


@functools.cache
def _rom_path(env_id: str) -> str:
    from ale_py import roms

    path = roms.get_rom_path(rom_ids()[env_id])
    if path is None:
        raise ValueError(f"ale-py has no ROM for {env_id}")
    return str(path)


class AleExactEnv:
    """`num_envs` Atari games, one ALEInterface each, with the gymnasium vector API
    (reset, step, close) of benchenv.make_env and `get_state`/`set_state` (module
    docstring). num_threads is accepted for make_env's sake: the games step one after
    the other in the calling thread."""

    exact_state = True  # get_state/set_state restore every bit the next step depends on

    def __init__(self, env_id: str, num_envs: int, seeds: list[int], protocol: dict[str, Any],
                 num_threads: int | None = None):
        import ale_py

        unknown = sorted(set(protocol) - set(ALE_KWARGS))
        if unknown:
            raise ValueError(f"the ale-exact backend does not take {unknown}; "
                             f"it takes {ALE_KWARGS}")
        if not protocol.get("gray_scale", True):
            raise ValueError("the ale-exact backend stacks grey frames only (gray_scale=True)")
        if protocol.get("episodic_life", False):
            raise ValueError("the ale-exact backend has no life-loss signal (episodic_life)")
        if len(seeds) != num_envs:
            raise ValueError(f"{len(seeds)} seeds for {num_envs} envs")
        del num_threads
        self.env_id, self.num_envs = env_id, num_envs
        self.stack_num = int(protocol.get("stack_num", 4))
        self.height = int(protocol.get("img_height", 84))
        self.width = int(protocol.get("img_width", 84))
        self.frame_skip = int(protocol.get("frame_skip", 4))
        self.noop_max = int(protocol.get("noop_max", 30))
        self.max_episode_steps = int(protocol.get("max_episode_steps", 27000))
        self.reward_clip = bool(protocol.get("reward_clip", False))
        self._protocol = {k: protocol[k] for k in sorted(protocol)}
        self.sticky = float(protocol.get("repeat_action_probability", 0.25))
        self._ales, self._rngs = [], []
        for seed in seeds:
            ale_seed, rng_seed = stream_seeds(int(seed))
            ale = ale_py.ALEInterface()
            ale.setLoggerMode(ale_py.LoggerMode.Error)
            ale.setInt("random_seed", ale_seed)
            ale.setFloat("repeat_action_probability", 0.0)  # drawn here (module docstring)
            ale.loadROM(_rom_path(env_id))
            self._ales.append(ale)
            self._rngs.append(np.random.default_rng(rng_seed))
        full = bool(protocol.get("full_action_space", True))
        ale0 = self._ales[0]
        self._actions = list(ale0.getLegalActionSet() if full else ale0.getMinimalActionSet())
        self._noop, self._fire = ale_py.Action.NOOP, ale_py.Action.FIRE
        self._fire_reset = self._fire in self._actions
        self._stack = np.zeros((num_envs, self.stack_num, self.height, self.width), np.uint8)
        self._elapsed = np.zeros(num_envs, np.int32)
        self._resetting = np.zeros(num_envs, bool)  # the next step returns a reset frame
        self._held = np.zeros(num_envs, np.int32)  # index of the action each env last ran
        self._screens = np.zeros((2, *SCREEN_SHAPE), np.uint8)
        self.single_observation_space = self._stack.shape[1:]
        self.num_actions = len(self._actions)

    # --- stepping ------------------------------------------------------------------------

    def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        screens = np.stack([self._reset_game(i) for i in range(self.num_envs)])
        for i, frame in enumerate(frames.resize_area(screens, self.height, self.width)):
            frames.fill_stack(self._stack[i], frame)
        self._elapsed[:] = 0
        self._resetting[:] = False
        zeros = np.zeros(self.num_envs, np.float32)
        return self._stack.copy(), self._info(zeros, np.zeros(self.num_envs, bool))

    def step(self, actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        actions = np.asarray(actions).reshape(self.num_envs)
        n = self.num_envs
        raw = np.zeros(n, np.float32)
        game_over = np.zeros(n, bool)
        screens = np.empty((n, *SCREEN_SHAPE), np.uint8)
        reset = self._resetting.copy()
        for i in range(n):
            if reset[i]:
                screens[i] = self._reset_game(i)
            else:
                raw[i], game_over[i], screens[i] = self._skip(i, int(actions[i]))
        for i, frame in enumerate(frames.resize_area(screens, self.height, self.width)):
            if reset[i]:
                frames.fill_stack(self._stack[i], frame)
            else:
                frames.push_frame(self._stack[i], frame)
        self._elapsed = np.where(reset, 0, self._elapsed + 1).astype(np.int32)
        trunc = ~reset & (self._elapsed >= self.max_episode_steps)
        done = game_over | trunc
        term = done & ~trunc
        clipped = np.sign(raw).astype(np.float32) if self.reward_clip else raw.copy()
        self._resetting = done
        return self._stack.copy(), clipped, term, trunc, self._info(raw, game_over)

    def _reset_game(self, i: int) -> np.ndarray:
        """Env i's new game: no-ops, then FIRE (EnvPool's order); its grey screen."""
        ale = self._ales[i]
        ale.reset_game()
        for _ in range(int(self._rngs[i].integers(0, max(self.noop_max, 1)))):
            ale.act(self._noop)
            if ale.game_over():
                ale.reset_game()
        last = self._noop
        if self._fire_reset:
            ale.act(self._fire)
            last = self._fire
            if ale.game_over():
                ale.reset_game()
        # a sticky first frame repeats what the reset ran last
        self._held[i] = self._actions.index(last) if last in self._actions else 0
        return ale.getScreenGrayscale()

    def _skip(self, i: int, action: int) -> tuple[float, bool, np.ndarray]:
        """Env i runs action index `action` for a frame skip (fewer frames when the game
        ends), each frame sticky: (summed reward, game over, the max-pooled grey screen)."""
        ale, buf = self._ales[i], self._screens
        takes = self._rngs[i].random(self.frame_skip) >= self.sticky  # one draw per frame
        reward, ran = 0, 0
        for f in range(self.frame_skip):
            if takes[f]:
                self._held[i] = action
            reward += ale.act(self._actions[self._held[i]])
            ale.getScreenGrayscale(buf[f % 2])
            ran += 1
            if ale.game_over():
                break
        last = buf[(ran - 1) % 2]
        before = buf[ran % 2] if ran > 1 else None
        return float(reward), ale.game_over(), frames.max_pool(last, before).copy()

    def _info(self, raw: np.ndarray, game_over: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "env_id": np.arange(self.num_envs, dtype=np.int32),
            "lives": np.array([a.lives() for a in self._ales], np.int32),
            "reward": raw,
            "terminated": game_over.astype(np.int32),
            "elapsed_step": self._elapsed.copy(),
            "frame_number": np.array([a.getFrameNumber() for a in self._ales], np.int64),
            "episode_frame_number": np.array([a.getEpisodeFrameNumber() for a in self._ales],
                                             np.int64),
        }

    # --- state ---------------------------------------------------------------------------

    def get_state(self) -> bytes:
        """Every bit the next step depends on (module docstring), as bytes (no pickle)."""
        arrays: dict[str, np.ndarray] = {
            "stack": self._stack, "elapsed": self._elapsed, "resetting": self._resetting,
            "held": self._held}
        for i, ale in enumerate(self._ales):
            arrays[f"ale{i}"] = np.frombuffer(ale.cloneState(include_rng=True).serialize(),
                                              np.uint8)
        meta = {"format": STATE_FORMAT, "env_id": self.env_id, "num_envs": self.num_envs,
                "protocol": self._protocol,
                "rngs": [rng.bit_generator.state for rng in self._rngs]}
        return state_bytes.pack(meta, arrays)

    def set_state(self, data: bytes) -> None:
        """Restore a state `get_state` saved, from an env of the same game, env count and
        protocol (ValueError otherwise); the next step is the saved env's next step."""
        import ale_py

        meta, arrays = state_bytes.unpack(data)
        mine = {"format": STATE_FORMAT, "env_id": self.env_id, "num_envs": self.num_envs,
                "protocol": self._protocol}
        theirs = {k: meta.get(k) for k in mine}
        if theirs != mine:
            raise ValueError(f"env state of another env: {theirs} (this env: {mine})")
        for i, ale in enumerate(self._ales):
            ale.restoreState(ale_py.ALEState(arrays[f"ale{i}"].tobytes()))
            self._rngs[i].bit_generator.state = meta["rngs"][i]
        self._stack[:] = arrays["stack"]
        self._elapsed = arrays["elapsed"].astype(np.int32)
        self._resetting = arrays["resetting"].astype(bool)
        self._held = arrays["held"].astype(np.int32)

    def close(self) -> None:
        self._ales = []
