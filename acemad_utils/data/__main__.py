"""`python -m acemad_utils.data summary [...]`: the benchmark data tools of acemad_utils.data.benchmarks."""

import sys

from acemad_utils.data.benchmarks import main

sys.exit(main())
