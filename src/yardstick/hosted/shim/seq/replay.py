"""`seq.replay`: see `yardstick.hosted.seq_api.replay`."""

from yardstick.hosted.seq_api.replay import *  # noqa: F403
from yardstick.hosted.seq_api.replay import __all__, _install  # noqa: F401
