"""Prometheus metrics in the text exposition format, served by a tiny HTTP thread.

No client library: the few metric kinds the daemon needs (counters with labels, gauges, a
cycle-latency summary) are written by hand in the exposition format version 0.0.4.

Besides the cycle, action and cluster metrics: ``errors_total{kind}`` (cycles that failed:
``unavailable`` = slurmctld not answering, ``slurm`` = a Slurm command or its output was
unusable, ``internal`` = a bug), ``lease_renewals_total{outcome}``, ``safety_refusals_total``,
``reconciled_total{what}`` (what the start-up reconciliation did), ``shadow_placements_total
{outcome}`` (shadow mode: the policy's placement compared with Slurm's), and
``last_cycle_timestamp_seconds`` (alert when it stops moving).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slurm_sched.model import ActionResult, ClusterSnapshot


class SchedulerMetrics:
    """Thread-safe metric values; ``render()`` gives the /metrics body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cycles = 0
        self.cycle_latency_sum_s = 0.0
        self.cycle_latency_max_s = 0.0
        self.last_cycle_latency_s = 0.0
        self.actions: dict[tuple[str, str], int] = {}
        self.pending_jobs = 0
        self.running_jobs = 0
        self.suspended_jobs = 0
        self.gpus_total = 0
        self.gpus_busy = 0
        self.up = 1
        self.errors: dict[str, int] = {}
        self.lease_renewals: dict[str, int] = {}
        self.safety_refusals = 0
        self.reconciled: dict[str, int] = {}
        self.shadow: dict[str, int] = {}
        self.last_cycle_timestamp_s = 0.0
        self.info: dict[str, str] = {}

    def set_info(self, **labels: str) -> None:
        """Constant labels of ``slurm_sched_info`` (policy, mode)."""
        with self._lock:
            self.info = dict(labels)

    def count_error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def add(self, family: str, label: str, n: int = 1) -> None:
        """Add ``n`` to a labelled counter: ``lease_renewals``, ``reconciled`` or ``shadow``."""
        if n == 0:
            return
        with self._lock:
            counter: dict[str, int] = getattr(self, family)
            counter[label] = counter.get(label, 0) + n

    def set_counts(self, family: str, counts: dict[str, int]) -> None:
        """Replace a labelled counter with totals kept elsewhere (e.g. the backend's)."""
        with self._lock:
            setattr(self, family, dict(counts))

    def count_refusals(self, n: int) -> None:
        with self._lock:
            self.safety_refusals += n

    def observe_cycle(self, latency_s: float, results: list[ActionResult]) -> None:
        with self._lock:
            self.cycles += 1
            self.cycle_latency_sum_s += latency_s
            self.cycle_latency_max_s = max(self.cycle_latency_max_s, latency_s)
            self.last_cycle_latency_s = latency_s
            self.last_cycle_timestamp_s = time.time()
            for r in results:
                key = (r.action.kind, "ok" if r.ok else "failed")
                self.actions[key] = self.actions.get(key, 0) + 1

    def observe_snapshot(self, snap: ClusterSnapshot) -> None:
        with self._lock:
            self.pending_jobs = len(snap.pending)
            self.running_jobs = len(snap.running)
            self.suspended_jobs = len(snap.suspended)
            self.gpus_total = snap.cluster.total_gpus
            self.gpus_busy = len(snap.occupancy)

    def render(self) -> str:
        with self._lock:
            lines = [
                "# HELP slurm_sched_up 1 while the scheduler loop runs.",
                "# TYPE slurm_sched_up gauge",
                f"slurm_sched_up {self.up}",
                "# HELP slurm_sched_cycle_latency_seconds Time of one snapshot-decide-apply cycle.",
                "# TYPE slurm_sched_cycle_latency_seconds summary",
                f"slurm_sched_cycle_latency_seconds_sum {self.cycle_latency_sum_s:.6f}",
                f"slurm_sched_cycle_latency_seconds_count {self.cycles}",
                "# HELP slurm_sched_cycle_latency_max_seconds Slowest cycle so far.",
                "# TYPE slurm_sched_cycle_latency_max_seconds gauge",
                f"slurm_sched_cycle_latency_max_seconds {self.cycle_latency_max_s:.6f}",
                "# HELP slurm_sched_actions_total Actions applied, by kind and outcome.",
                "# TYPE slurm_sched_actions_total counter",
            ]
            for (kind, outcome), n in sorted(self.actions.items()):
                lines.append(f'slurm_sched_actions_total{{kind="{kind}",outcome="{outcome}"}} {n}')
            for name, help_, label, counter in [
                ("errors_total", "Cycles that failed, by kind.", "kind", self.errors),
                ("lease_renewals_total", "Fail-open lease renewals, by outcome.", "outcome",
                 self.lease_renewals),
                ("reconciled_total", "Jobs the start-up reconciliation acted on.", "what",
                 self.reconciled),
                ("shadow_placements_total", "Shadow mode: policy placement vs Slurm's.",
                 "outcome", self.shadow),
            ]:
                lines += [f"# HELP slurm_sched_{name} {help_}",
                          f"# TYPE slurm_sched_{name} counter"]
                lines += [f'slurm_sched_{name}{{{label}="{k}"}} {n}'
                          for k, n in sorted(counter.items())]
            lines += [
                "# HELP slurm_sched_safety_refusals_total Actions dropped by the safety limits.",
                "# TYPE slurm_sched_safety_refusals_total counter",
                f"slurm_sched_safety_refusals_total {self.safety_refusals}",
                "# HELP slurm_sched_last_cycle_timestamp_seconds When the last cycle ended.",
                "# TYPE slurm_sched_last_cycle_timestamp_seconds gauge",
                f"slurm_sched_last_cycle_timestamp_seconds {self.last_cycle_timestamp_s:.3f}",
            ]
            if self.info:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(self.info.items()))
                lines += ["# HELP slurm_sched_info The daemon's policy and mode.",
                          "# TYPE slurm_sched_info gauge", f"slurm_sched_info{{{labels}}} 1"]
            util = self.gpus_busy / self.gpus_total if self.gpus_total else 0.0
            for name, help_, value in [
                ("pending_jobs", "Managed jobs waiting.", self.pending_jobs),
                ("running_jobs", "Managed jobs running.", self.running_jobs),
                ("suspended_jobs", "Managed jobs suspended.", self.suspended_jobs),
                ("gpus_total", "GPUs in managed partitions.", self.gpus_total),
                ("gpu_utilization", "Fraction of GPUs held by managed jobs.", round(util, 6)),
            ]:
                lines += [f"# HELP slurm_sched_{name} {help_}", f"# TYPE slurm_sched_{name} gauge",
                          f"slurm_sched_{name} {value}"]
            return "\n".join(lines) + "\n"


def serve_metrics(metrics: SchedulerMetrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving ``/metrics`` on a daemon thread; returns the server (``shutdown()`` it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
