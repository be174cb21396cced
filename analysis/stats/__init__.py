"""Statistics: pure functions of score arrays (aggregate metrics, the stratified
bootstrap, Welch intervals). Imports nothing else of analysis/ but analysis.errors.
"""
