"""What the HTTP edge hands on once a call is answered, and when it may be worked: the answered call
(`answered.Answered`), the moments between requests (`idle.Idle`) and the collection owed then
(`idle.collect_owed`).

A floor of its own, below both the extender, which makes these, and the controllers, which work from them
(the shadow rules), so that a controller never imports the HTTP edge and the edge composes the controllers.
It stands on `rules` and `decide` only: it holds records and a clock, no logic of either side.
"""
