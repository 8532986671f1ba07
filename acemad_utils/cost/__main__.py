import sys

from acemad_utils.cost.estimate import main

sys.exit(main())
