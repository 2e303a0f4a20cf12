"""``python -m broker_core.cli``: the ``seglog`` command."""

import sys

from .seglog_command import main

sys.exit(main())
