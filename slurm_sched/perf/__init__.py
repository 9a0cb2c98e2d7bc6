"""Performance models: how fast a job runs where and with whom.

They feed the policies (predictions) and the simulator's progress model (ground truth of the
simulated world). Find a progress model by name with :mod:`slurm_sched.perf.registry`.
"""
