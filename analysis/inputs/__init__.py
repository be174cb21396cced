"""Inputs: run records, published tables, openrlbenchmark exports and caches, and the
env-protocol guard, read into runrecord.Run objects.
"""
