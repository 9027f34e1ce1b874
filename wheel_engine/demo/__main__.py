"""``python -m wheel_engine.demo [options]``: the same as ``wheel-engine demo [options]``."""

import sys

from wheel_engine.cli import main

sys.exit(main(["demo", *sys.argv[1:]]))
