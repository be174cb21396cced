"""Tools beside the trainer: the benchmarks (bench, throughput), the benchmark-only no-op
forward pass (actor_hook, injected through Context.actor_forward) and the determinism
check. They import the trainer; the trainer never imports them (docs/architecture.md)."""
