"""Tier 0: the specification — plain NumPy loops, float64 unless given float32."""

