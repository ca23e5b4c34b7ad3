"""``python -m repogym.cli``: the same as the ``repogym`` command."""

import sys

from repogym.cli import main

sys.exit(main())
