"""Scoring: runs -> per-group (seeds x tasks) score matrices, seed replicates, curves,
groups of a suite and the tables that print them.
"""
