"""Tools for rule authors: check, explain, test, and the scheduler configuration generator."""
