import sys

from acemad_utils.reproduce.cli import main

sys.exit(main())
