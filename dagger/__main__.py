"""``python -m dagger`` is the ``dagger`` command."""

import sys

from dagger.cli import main

sys.exit(main())
