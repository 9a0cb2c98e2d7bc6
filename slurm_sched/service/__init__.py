"""The production service: config, daemon loop, fail-open lease, decision log, metrics."""
