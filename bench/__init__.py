"""Benchmarks for kafkalite (``make bench`` runs ``python -m bench.run``)."""
