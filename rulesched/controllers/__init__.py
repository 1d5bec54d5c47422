"""The background controllers: loops that watch what rulesched reads or answers and decide what to do with it, one
package each with one entry point and its own HTTP and metrics surface beside it: `requeue` (nudge a
rejected pod when a change lets it through), `audit` (running pods against the rules in force, and
descheduling), `shadow` (every answered call decided again by the shadow rules, and compared). The server
(`extender/server.py`) builds and starts them; they never import the extender, nor one another, and write only
through `rulesched.writes`.
"""
