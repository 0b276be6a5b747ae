"""``python -m openg2g``: the same command line as ``openg2g``."""

import sys

from openg2g.cli.main import main

sys.exit(main())
