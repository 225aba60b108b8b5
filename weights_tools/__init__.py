"""Command-line tools for checkpoints: `python -m weights_tools.convert` and
`python -m weights_tools.inspect` (each has --help)."""
