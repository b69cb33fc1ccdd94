"""``python -m minibroker`` runs the same command line as ``minibroker``."""

import sys

from .cli.main import main

sys.exit(main())
