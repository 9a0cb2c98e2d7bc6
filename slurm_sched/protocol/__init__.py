"""What the scheduler and a job's runtime agree on, and nothing else.

- :mod:`~slurm_sched.protocol.hints`: the hints a user puts in a job's ``--comment`` (schema,
  parsing, one-line errors naming the bad field).
- :mod:`~slurm_sched.protocol.settings_file`: the per-job files in the settings directory
  (settings the scheduler writes, progress the job writes, the scheduler's ledger).

Both the Slurm backend and :mod:`slurm_sched.runtime` import this package; neither imports the
other.
"""
