"""Trim raw ``squeue --json`` / ``sinfo --json`` output to the keys the parser reads.

Recorded from the mini cluster (``slurm_sched/slurm/cluster.sh``, Slurm 22.05.8)::

    source /tmp/slurm-sched-cluster/env.sh
    squeue --json > /tmp/squeue.json && sinfo --json > /tmp/sinfo.json
    python tests/golden/slurm/trim.py /tmp/squeue.json > tests/golden/slurm/squeue_mixed.json
    python tests/golden/slurm/trim.py /tmp/sinfo.json > tests/golden/slurm/sinfo.json

``sinfo_ctld_restarted.json``: ``sinfo --json`` just after slurmctld was SIGKILLed and started
again while node a100-1 was crashed (``cluster.sh ctld kill``, ``node kill a100-1``,
``ctld start``): the other nodes have registered, a100-1 still shows ``shard:0``.

``max_nodes`` and ``tres_req_str`` in ``squeue_mixed.json`` are not from the recording: they
carry the values 22.05.8 reports for such jobs (checked on the mini cluster): ``max_nodes`` is
the ``-N`` maximum while a job has never run and 0 once it has; ``tres_req_str`` carries
``node=<count>``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

JOB_KEYS = (
    "job_id",
    "name",
    "job_state",
    "state_reason",
    "state_description",
    "priority",
    "partition",
    "nodes",
    "node_count",
    "max_nodes",
    "tres_req_str",
    "required_nodes",
    "excluded_nodes",
    "features",
    "comment",
    "admin_comment",
    "account",
    "user_name",
    "user_id",
    "submit_time",
    "start_time",
    "end_time",
    "eligible_time",
    "suspend_time",
    "pre_sus_time",
    "time_limit",
    "time_minimum",
    "restart_cnt",
    "tres_per_node",
    "tres_per_job",
    "tres_per_task",
    "tres_per_socket",
    "gres_detail",
    "cpus",
    "memory_per_cpu",
    "memory_per_node",
    "exit_code",
    "batch_flag",
    "flags",
    "job_resources",
)
NODE_KEYS = (
    "name",
    "state",
    "state_flags",
    "reason",
    "partitions",
    "cpus",
    "alloc_cpus",
    "real_memory",
    "alloc_memory",
    "gres",
    "gres_used",
    "features",
    "active_features",
)


def trim(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"meta": data.get("meta", {}), "errors": data.get("errors", [])}
    if "jobs" in data:
        jobs = []
        for j in data["jobs"]:
            t = {k: j[k] for k in JOB_KEYS if k in j}
            res = t.get("job_resources")
            if res:
                t["job_resources"] = {
                    "nodes": res.get("nodes"),
                    "allocated_nodes": [
                        {"nodename": n.get("nodename")} for n in res.get("allocated_nodes", [])
                    ],
                }
            jobs.append(t)
        out["jobs"] = jobs
    if "nodes" in data:
        out["nodes"] = [{k: n[k] for k in NODE_KEYS if k in n} for n in data["nodes"]]
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(trim(json.load(f)), indent=1))
