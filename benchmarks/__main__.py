"""``python -m benchmarks [--size tiny|small|large] [--json OUT] [--only NAME...]``: see benchmarks.harness."""

from .harness import main

raise SystemExit(main())
