"""The link to a coordinator: the protocol, embedded, remote, background, liveness."""
