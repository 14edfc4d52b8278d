"""Artifact body stores (`aidememo.ports.BodyStore`): local files and an in-memory double."""
