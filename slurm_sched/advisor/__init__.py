"""``slurm-sched advise``: replay a site's Slurm accounting under every policy and recommend one.

One module per step: :mod:`records` (what the advisor reads of an accounting file),
:mod:`cluster_shape` (the cluster), :mod:`replay` (the simulations), :mod:`observed` (the history
as it happened), :mod:`metrics` (one row per policy), :mod:`validation` (how closely the
baseline reproduces the history), :mod:`resample` (the recommendation and its uncertainty),
:mod:`pipeline` (all of them in order), the three reports and :mod:`advise_cli`.
"""
