"""``python -m minibroker`` runs the same command line as ``minibroker``."""

import sys

from .cli import main

sys.exit(main())
