"""Experiment sweeps: a grid of simulations (traces x loads x seeds x clusters x policies x
worlds), run locally in a process pool or as a Slurm job array, and merged into one report.

``grid`` parses and validates the grid file, ``cells`` names and stores each cell's result,
``run_local`` / ``run_slurm`` run the missing cells, ``calibrate`` estimates a grid's cost,
``report`` merges the cell files into tables and figures, ``sweep_cli`` is ``slurm-sched sweep``.
"""
