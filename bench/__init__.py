"""wheel-engine benchmarks: pytest-benchmark micro benchmarks and the side-by-side comparison."""
