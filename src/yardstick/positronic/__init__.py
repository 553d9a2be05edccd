"""The Positronic front door: the contract of `positronic-platform-client` 0.37.1 (dotted routes under
`/v1/`, its models in and out, its error envelope and reason codes), translated to and from the core."""
