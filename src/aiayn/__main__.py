"""``python -m aiayn`` is the ``aiayn`` command (torchrun launches it this way)."""

import sys

from aiayn.cli import main

sys.exit(main())
