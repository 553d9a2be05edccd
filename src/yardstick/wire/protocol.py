"""The session protocol a policy server speaks (the Positronic model-server protocol, version 3).

Server → client: `{status: waiting|loading}` frames while the session is prepared, then
`{status: ready, protocol_version: 3, session_id, meta}`; then one `{result, timing}` or `{error}` per
request. Client → server: `{session_id, observation}`; `{session_id, end_session: true}` ends the session
and is acknowledged with the same once the policy has let go of the episode. A fault that ends the session
is `{status: error, error}` followed by a close (code 1008).

Yardstick adds fields that a stock peer ignores (it reads only the keys above): a request may carry
`seed` (the seed a sampling policy draws with, so a run replays exactly across a wire), `step` (the
episode's step the observation was made at), `episode` (task, seed, trial: what a policy's on-episode
hook is told) and `observed` (`[[step, observation], ...]`: those made since the last request, before its
own, for a server whose meta says `observes_each`; a robot observes faster than it acts; and `again: true`
when its observation was handed before, not to be observed twice; and `plans`, `[{step, value}, ...]`:
what a planner wrote for the robot since its last request, appended to the episode's
`state["seq.plans"]` before the policy is asked); an end request
may carry `next_session: true`, and a server that advertises `next_session` in its meta then opens the
next session on the same connection instead of closing it.
"""

from __future__ import annotations

from enum import StrEnum

PROTOCOL_VERSION_KEY = "protocol_version"
PROTOCOL_VERSION = 3

STATUS = "status"
META = "meta"
RESULT = "result"
ERROR = "error"
SESSION_ID = "session_id"
OBSERVATION = "observation"
END_SESSION = "end_session"
TIMING = "timing"

# Yardstick's additions.
SEED = "seed"
STEP = "step"
EPISODE = "episode"
OBSERVED = "observed"
AGAIN = "again"
PLANS = "plans"
OBSERVES_EACH = "observes_each"
NEXT_SESSION = "next_session"
YARDSTICK_META = "yardstick"

# Meta keys a client reads.
ACTION_FPS = "action_fps"
ACTION_HORIZON_SEC = "action_horizon_sec"
IMAGE_SIZES = "image_sizes"
CHECKPOINT_ID = "checkpoint_id"
SESSION_PARAMS = "session_params"
EFFECTIVE_PARAMS = "effective_params"

# The phases `timing` reports, in milliseconds on the server's clock. `served` spans the others: from the
# request's arrival to the answer's encoding.
SERVED_MS = "served_ms"
DECODE_MS = "decode_ms"
QUEUED_MS = "queued_ms"
INFER_MS = "infer_ms"
MODEL_MS = "model_ms"

AUTHORIZATION = "authorization"
# The key the keepalive answer carries its seconds under, on the HTTP route and the gRPC method alike.
ALIVE_SECONDS = "alive_seconds"
# A refused session's close code: policy violation, as the peers use it.
CLOSE_REFUSED = 1008
# An openpi session whose policy raised: internal error, after a text frame with the traceback.
CLOSE_INTERNAL_ERROR = 1011


class Status(StrEnum):
    WAITING = "waiting"
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"
