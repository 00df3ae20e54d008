"""The benchmarks behind the figures in the docs and README; run each from the repository root as
``python -m benchmarks.bench_x`` (``--help`` for its options)."""
