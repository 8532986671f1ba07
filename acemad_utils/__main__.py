"""`python -m acemad_utils run QUESTIONS ...` and `python -m acemad_utils pilot ...` (command.py)."""

import sys

from acemad_utils.command import main

sys.exit(main())
