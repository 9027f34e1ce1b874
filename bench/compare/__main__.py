"""``python -m bench.compare [--quick] [--out DIR] [--only FIGURE[,FIGURE]]``."""

from bench.compare import main

raise SystemExit(main())
