"""`seq` as Yardstick provides it: `yardstick.hosted.seq_api` under the name a Sequences file imports.

This folder (`yardstick/hosted/shim`) goes on the import path of whatever runs a user's file; see
`yardstick.hosted.seq_api` for what it holds and `yardstick.sdk.load` for where it goes on the path.
"""

from yardstick.hosted.seq_api import *  # noqa: F403
from yardstick.hosted.seq_api import __all__, __getattr__  # noqa: F401
from yardstick.hosted.seq_api import replay as replay  # `seq.replay`, also as `from seq import replay`
