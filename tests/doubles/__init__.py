"""Doubles of what cannot run here (the Workers runtime around our Python), on real SQLite."""
