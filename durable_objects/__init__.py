"""Durable Objects of the edge profile."""
