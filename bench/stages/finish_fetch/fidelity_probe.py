"""The latency-fidelity probe's call, shared by the Locust probe user and the stage's plain loops.

Its own module, with nothing imported: the locustfile must not import fidelity.py,
whose subprocess import, in a gevent-patched Locust process, held up the message
handling of `--processes` workers for a second.
"""

PROBE_SCRIPT = "return 1"
PROBE_LABEL = "probe: EVALSHA return 1"
PROBE_METRIC = f"call:{PROBE_LABEL}"
