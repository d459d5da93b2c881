"""Chronicle's runtime: the store, the agent loop, providers, tools and the CLI."""
