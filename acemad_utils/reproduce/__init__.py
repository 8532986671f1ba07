"""reproduce: the command line behind `make reproduce`, and the notebook tools.

cli       profiles -> every numbered notebook through papermill -> outputs/ (python -m acemad_utils.reproduce)
nbtools   keeping committed notebooks clean (python -m acemad_utils.reproduce.nbtools)
"""

from acemad_utils.reproduce.cli import main, run

__all__ = ["main", "run"]
