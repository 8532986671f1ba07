"""`python -m acemad_utils run QUESTIONS ...` (acemad_utils/command.py, docs/own-questions.md) and
`python -m acemad_utils pilot FILE|--profile NAME` (acemad_utils/pilot.py, docs/own-model.md)."""

import sys

from acemad_utils.command import main

sys.exit(main())
