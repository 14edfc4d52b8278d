"""Use cases over the ports: the command pipeline, queries and identity administration."""
