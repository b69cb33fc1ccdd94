"""``python -m minibroker`` runs the same command line as ``minibroker``."""

import sys

from .launch import main

sys.exit(main())
