"""Shadow rules: every answered filter and prioritize call decided again by a second rule book, and compared.

The entry point is `Shadow` (`controller.py`).

- What starts it: `rulesched serve --shadow-rules DIR`. The server (`extender/server.py`) builds the shadow
  book's `RuleStore` and its reloader, makes one `Shadow` over them and loads the book, and stops it on shutdown.
- What it reads: each answered call, handed on once its answer is sent (`Shadow.submit`, an `Answered` of
  `handoff/answered.py`: the pod, the node contexts the live decision saw, its `now` and the live Decision);
  when the extender is between requests (`Idle`, `handoff/idle.py`, kept by the connections); the nodes the
  refresh ahead makes ready (`Shadow.prepare`); and the shadow book of its store.
- What it gives back: `GET /shadow` (`http.py`, the summary of `summary.py`), its metrics (`metrics.py`,
  registered in the server's registry), a decision-log line per differing call, and the shadow book's whole
  decision of a call for `POST /explain?book=shadow` (`Shadow.explain`). It never changes an answer.

Inside: the queue worked between calls (`controller.py`, a waiting call in `queued.py`), the pace of its slices
(`pace.py`), the garbage collector held off while calls wait (`collector.py`), one comparison and the summary
(`summary.py`).
"""

from __future__ import annotations

from rulesched.controllers.shadow.controller import Shadow

__all__ = ["Shadow"]
