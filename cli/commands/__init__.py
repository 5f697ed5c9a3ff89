"""One module per `recount` command; each defines `register(app)`."""
