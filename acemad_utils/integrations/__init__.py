"""Adapters to evaluation harnesses, each an optional extra and a thin layer over protocol/ (no second
implementation of the math): inspect_ai.py (`pip install -e '.[inspect]'`)."""
