"""Each rule book's plan, made the first time the book is evaluated and kept beside it (not inside it: a
RuleBook is the language's frozen data, and knows nothing of how it is evaluated) for as long as the book
lives: a book the store replaced and nobody holds any more takes its plan and caches along.
"""

from __future__ import annotations

import threading
import weakref

from rulesched.decide.fast.plan import Plan
from rulesched.rules.book import RuleBook

_PLANS: dict[int, tuple[weakref.ref[RuleBook], Plan]] = {}
"""By `id` of a living book: the book (weakly) and its plan. Bounded by the books alive: the live one, the
shadow one, and those requests still hold."""
_making = threading.Lock()


def prepared(book: RuleBook) -> Plan:
    """The plan of `book`, made when it has none yet (a dictionary lookup on every call after the first)."""
    found = _PLANS.get(id(book))
    if found is not None and found[0]() is book:
        return found[1]
    with _making:
        found = _PLANS.get(id(book))
        if found is not None and found[0]() is book:
            return found[1]
        key = id(book)

        def forget(gone: weakref.ref[RuleBook]) -> None:
            if _PLANS.get(key, (None,))[0] is gone:  # another book may have its id since
                del _PLANS[key]

        plan = Plan(book.rule_sets, book.engine, book.generation)
        _PLANS[key] = (weakref.ref(book, forget), plan)
        return plan
