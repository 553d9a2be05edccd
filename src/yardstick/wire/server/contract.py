"""`python3 -m yardstick.wire.server.contract module:Class`: one policy served as the published container
contract (`platform_client.policy_container`) asks of an image: the Positronic session, and openpi's dialect
at the root, on TCP 8000 of every interface, each session opened only with the bearer token the platform
hands the container in `AUTH_TOKEN` (none demanded where it is unset: a run on one's own machine).

The command of an image built on `yardstick image base` (see examples/policy-image/); it needs nothing of
the CLI's, so the base holds only what a policy server imports.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from yardstick.sdk.load import load_object
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

POLICY_PORT: Final = 8000
AUTH_TOKEN_ENV: Final = "AUTH_TOKEN"


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python3 -m yardstick.wire.server.contract module:Class")
    reference = argv[0]
    host = PolicyHost(load_object(reference), model_id="policy", reference=reference, params={})
    token = os.environ.get(AUTH_TOKEN_ENV) or None
    options = ServeOptions(host="0.0.0.0", port=POLICY_PORT, token=token)
    server = PolicyServer({"policy": host}, options).start()
    said = f", sessions need the bearer token in ${AUTH_TOKEN_ENV}" if token else ""
    print(f"serving {reference} on 0.0.0.0:{POLICY_PORT}{said}", flush=True)
    server.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
