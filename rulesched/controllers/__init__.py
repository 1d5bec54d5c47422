"""The background controllers: loops that watch what rulesched reads and decide its writes to the cluster, one
package each with one entry point and its own HTTP and metrics surface beside it: `requeue` (nudge a
rejected pod when a change lets it through), `audit` (running pods against the rules in force, and
descheduling). The server (`extender/server.py`) builds and starts them; they never import the extender,
nor one another, and write only through `rulesched.writes`.
"""
