"""The benchmark (`python bench/run.py`): a package so that its modules import each other by name."""
