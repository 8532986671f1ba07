"""`python -m acemad_utils run QUESTIONS ...`: see acemad_utils/command.py and docs/own-questions.md."""

import sys

from acemad_utils.command import main

sys.exit(main())
