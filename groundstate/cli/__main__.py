"""``python -m groundstate.cli``: the same as the ``groundstate`` command."""

import sys

from groundstate.cli import main

sys.exit(main())
