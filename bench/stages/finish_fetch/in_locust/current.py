"""What the users, the window and the hooks of one Locust process share: the trial's settings
(read again at each test start) and the process's Recorder."""

from __future__ import annotations

import dataclasses

from locust.env import Environment

from bench.protocol.connection import RedisSettings
from bench.stages.finish_fetch.in_locust.options import redis_settings, trial_settings
from bench.stages.finish_fetch.loadstats import Recorder
from bench.stages.finish_fetch.trial_settings import TrialSettings

CONTROL_TIMEOUT_S = 30.0  # the controller's own socket timeout: a paused server is waited for

# A user's message to the process that runs the test: the server refuses every call (window.py).
REFUSED_MESSAGE = "emq_refused"

# Each process's measurements (one Recorder a process; users write to it).
RECORDER = Recorder()


class Current:
    """What every user of this process reads when it starts: set at each test start."""

    trial: TrialSettings | None = None
    redis: RedisSettings = RedisSettings()
    refusal_reported = False  # this process told the test's runner of a refusal (once is enough)


def read_settings(environment: Environment) -> TrialSettings:
    """Read the options (again: the web UI may have changed them) for this process's users."""
    trial = trial_settings(environment.parsed_options)
    Current.trial = trial
    Current.refusal_reported = False
    Current.redis = redis_settings(environment.parsed_options, environment.host or "", trial.socket_timeout_s)
    return trial


def control_settings() -> RedisSettings:
    """The controller's connection: the load's server, with a timeout that outlasts a pause."""
    timeout = max(Current.redis.socket_timeout_s, CONTROL_TIMEOUT_S)
    return dataclasses.replace(Current.redis, socket_timeout_s=timeout)
