"""The live Slurm side: mini-cluster bootstrap (``cluster.sh``, ``cluster.py``) and job hints."""
