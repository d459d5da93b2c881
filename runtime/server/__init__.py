"""`chronicle serve`: the agent service over HTTP (api.py) and the web viewer."""
