"""``python -m aiayn`` is the ``aiayn`` command (torchrun launches it this way)."""

import sys

from aiayn.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports this module
    sys.exit(main())
