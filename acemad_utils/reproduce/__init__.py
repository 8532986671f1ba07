"""`python -m acemad_utils.reproduce` (cli.py: every numbered notebook through papermill into outputs/) and
`python -m acemad_utils.reproduce.nbtools store|strip` (the committed notebooks' outputs)."""
