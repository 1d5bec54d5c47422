"""How a Decision is made, between the rule language (`rules/`) and the cluster (`cluster/`).

Twice: the meaning (`semantics.py`, and `reference.py`, the plain evaluation the tests hold the fast path
to) and the fast path (`fast/`), which gives the same Decision from its caches. `verbs.py` says what a call
asks (`Verb`, `Call`); `decision.py` is what it gets.
"""
