"""Benchmarking: the reference server (sim), the streaming client, load schedules, workloads and metrics."""
