"""The artifact profiles, one module each (see :mod:`slurm_sched.sim.profile`)."""
