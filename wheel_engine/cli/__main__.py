"""``python -m wheel_engine.cli``: the same as the ``wheel-engine`` command."""

import sys

from wheel_engine.cli import main

sys.exit(main())
