"""The Sequences front door: the contract the `sequence-ai` SDK and its `seq` CLI speak (`/v1/eval`,
`/v1/benchmarks`, `/v1/deployments`, `/v1/secrets`, ...), its bodies and its error body, translated to and
from the core. Written from the contract's facts; no code of `sequence-base` (which carries no licence)."""
