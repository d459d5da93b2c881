"""Sub-agents: the registry file, the delegation tools, and running children as sessions."""
