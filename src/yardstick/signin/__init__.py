"""Sign-in: the platform as its own device-flow provider, GitHub and OpenID Connect issuers behind
`users.register`, browser sessions and passwords for the approval pages, a signed-in user's keys."""
