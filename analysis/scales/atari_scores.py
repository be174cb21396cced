"""Random and human scores of the 57 Atari games (for human-normalised scores).

Source: the DQN Zoo table (google-deepmind/dqn_zoo, dqn_zoo/atari_data.py), identical to
openrlbenchmark's hns.py, as the Cleanba project's published data gives it. VideoPinball random = 16256.9 as in DQN Zoo;
rliable's colab uses 0.0 there, which changes that game's HNS 12.5x.
"""

from __future__ import annotations

ATARI_SOURCE = 'DQN Zoo atari_data / openrlbenchmark hns.py (identical values); VideoPinball random = 16256.9'

# env id -> (random score, human score)
ATARI_RANDOM_HUMAN: dict[str, tuple[float, float]] = {
    'Alien-v5': (227.8, 7127.7),
    'Amidar-v5': (5.8, 1719.5),
    'Assault-v5': (222.4, 742.0),
    'Asterix-v5': (210.0, 8503.3),
    'Asteroids-v5': (719.1, 47388.7),
    'Atlantis-v5': (12850.0, 29028.1),
    'BankHeist-v5': (14.2, 753.1),
    'BattleZone-v5': (2360.0, 37187.5),
    'BeamRider-v5': (363.9, 16926.5),
    'Berzerk-v5': (123.7, 2630.4),
    'Bowling-v5': (23.1, 160.7),
    'Boxing-v5': (0.1, 12.1),
    'Breakout-v5': (1.7, 30.5),
    'Centipede-v5': (2090.9, 12017.0),
    'ChopperCommand-v5': (811.0, 7387.8),
    'CrazyClimber-v5': (10780.5, 35829.4),
    'Defender-v5': (2874.5, 18688.9),
    'DemonAttack-v5': (152.1, 1971.0),
    'DoubleDunk-v5': (-18.6, -16.4),
    'Enduro-v5': (0.0, 860.5),
    'FishingDerby-v5': (-91.7, -38.7),
    'Freeway-v5': (0.0, 29.6),
    'Frostbite-v5': (65.2, 4334.7),
    'Gopher-v5': (257.6, 2412.5),
    'Gravitar-v5': (173.0, 3351.4),
    'Hero-v5': (1027.0, 30826.4),
    'IceHockey-v5': (-11.2, 0.9),
    'Jamesbond-v5': (29.0, 302.8),
    'Kangaroo-v5': (52.0, 3035.0),
    'Krull-v5': (1598.0, 2665.5),
    'KungFuMaster-v5': (258.5, 22736.3),
    'MontezumaRevenge-v5': (0.0, 4753.3),
    'MsPacman-v5': (307.3, 6951.6),
    'NameThisGame-v5': (2292.3, 8049.0),
    'Phoenix-v5': (761.4, 7242.6),
    'Pitfall-v5': (-229.4, 6463.7),
    'Pong-v5': (-20.7, 14.6),
    'PrivateEye-v5': (24.9, 69571.3),
    'Qbert-v5': (163.9, 13455.0),
    'Riverraid-v5': (1338.5, 17118.0),
    'RoadRunner-v5': (11.5, 7845.0),
    'Robotank-v5': (2.2, 11.9),
    'Seaquest-v5': (68.4, 42054.7),
    'Skiing-v5': (-17098.1, -4336.9),
    'Solaris-v5': (1236.3, 12326.7),
    'SpaceInvaders-v5': (148.0, 1668.7),
    'StarGunner-v5': (664.0, 10250.0),
    'Surround-v5': (-10.0, 6.5),
    'Tennis-v5': (-23.8, -8.3),
    'TimePilot-v5': (3568.0, 5229.2),
    'Tutankham-v5': (11.4, 167.6),
    'UpNDown-v5': (533.4, 11693.2),
    'Venture-v5': (0.0, 1187.5),
    'VideoPinball-v5': (16256.9, 17667.9),
    'WizardOfWor-v5': (563.5, 4756.5),
    'YarsRevenge-v5': (3092.9, 54576.9),
    'Zaxxon-v5': (32.5, 9173.3),
}
