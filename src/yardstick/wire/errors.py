"""What can go wrong on a wire, in terms a caller can act on."""

from __future__ import annotations

from enum import Enum


class ConnectRefusal(Enum):
    """What a connect that did not open says about the server, and so whether to try again."""

    COLD = "cold"  # a server still starting (503, 429, not yet an upgrade): retry to the deadline
    SILENT = "silent"  # nothing answered (refused, timed out, reset): retry to the deadline
    FORBIDDEN = "forbidden"  # the credential was refused: a few attempts, then give up
    FINAL = "final"  # no retry changes it (no such host, a bad certificate, a route that is not served)


class WireError(Exception):
    """Anything a wire could not do."""


class ConnectRefused(WireError):
    """A session did not open. `refusal` says whether trying again can help."""

    def __init__(self, refusal: ConnectRefusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class PeerDisconnected(WireError):
    """The other end closed the connection, or it dropped."""


class ProtocolError(WireError):
    """A message that breaks the protocol: undecodable, truncated, too large, or of the wrong shape."""


class RemoteError(WireError):
    """The server answered a request with an error (its policy raised); the session is still usable."""


class AddressError(ValueError):
    """An address that breaks the grammar: `field` names the part, the message says the rule."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule
