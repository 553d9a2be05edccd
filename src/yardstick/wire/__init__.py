"""Policies across a network: the msgpack-numpy codec, the session protocol, the addresses and dialers of
every wire, and the policy server."""
