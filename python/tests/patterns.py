"""Test data shared by the suite and its target process."""


def pattern(seed, size):
    """Bytes that differ per seed and per position (period 251, a prime)."""
    period = bytes((i * 31 + seed) % 251 for i in range(251))
    return (period * (size // 251 + 1))[:size]
