"""Workload generators: documented, seeded recipes that build the traces the reproductions use."""
