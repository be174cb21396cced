"""Score scales: each env's (low, high) reference scores and the map from raw returns
to normalised units (Atari random/human, CartPole, user-given).
"""
