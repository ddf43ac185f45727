"""Mooncake TENT bindings: ``from mooncake import engine``."""
