"""One atomic_sliced pass, timed at the client (the sweeper's longest call) and inside Redis
(SLOWLOG's script calls over the server's 1 ms threshold): shared by the sliced diagnoses."""

from bench.protocol.connection import Client
from bench.protocol.sweep import Sweeper


def sliced_pass(client: Client, sweeper: Sweeper) -> str:
    """Run one pass; what it took, as the diagnoses print it."""
    client.slowlog_reset()
    result = sweeper.sweep()
    evals = [e["duration"] for e in client.slowlog_get(10000) if e["command"].startswith(b"EVALSHA")]
    return (
        f"client max {result.longest_call_s * 1e3:.2f} ms, "
        f"SLOWLOG EVALSHA over 1 ms: {len(evals)}, max {max(evals, default=0) / 1e3:.2f} ms"
    )
