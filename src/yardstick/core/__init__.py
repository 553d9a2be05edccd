"""The platform's core, in its own types: runs and their episodes, admission and quotas, boards, artifacts,
accounts and keys, the catalogue, the workers that play the queue. No contract's documents or codes: the
front doors (`positronic`, `sequences`) translate to and from these."""
