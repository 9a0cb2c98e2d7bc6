"""``slurm-sched run``: the production daemon around the controller loop.

One process: ``Controller(SlurmBackend, SafePolicy(policy), WallClock)`` cycling every
``period_s`` (sooner when the policy's timer is due), plus

- **fail-open leases**: managed jobs carry a begin time a lease ahead (submit plugin); every
  fresh snapshot renews the leases that are due (``SlurmBackend``, ``slurm/lease.py``). If this
  process dies, nobody renews and Slurm schedules the jobs itself;
- **start-up reconciliation** (``service/reconcile.py``), retried until slurmctld answers;
- **errors are data**: a cycle that fails because slurmctld does not answer (or a Slurm command
  misbehaves) is counted in ``slurm_sched_errors_total`` and logged, and the loop goes on; only
  ``max_internal_errors`` unexpected exceptions in a row end the process (exit 1, so systemd
  restarts it);
- the **decision log** (one JSON line per action with its reason and Slurm commands, per safety
  refusal, per daemon event, and per change an operator or Slurm made that the backend noticed:
  a node drained or back, a job held or released, a start Slurm did not carry out, a changed
  time limit, a job's end) and **Prometheus metrics** on ``/metrics``;
- **systemd**: ``READY=1`` after the reconciliation, ``WATCHDOG=1`` after every cycle and while
  waiting, ``STATUS=``, ``STOPPING=1``;
- **signals**: SIGTERM/SIGINT finish the cycle in flight and exit 0, leaving the jobs as they
  are (the leases keep them safe); SIGHUP re-reads the config file and applies what can change
  at run time (policy, policy options, safety limits, period, log level);
- **shadow mode** (``dry_run``): the backend runs only read-only Slurm commands; the commands a
  live daemon would run are logged, and each placement the policy would have chosen is compared
  with the one Slurm (or whoever runs the cluster) actually chose, one summary line per cycle.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from slurm_sched.clock import WallClock
from slurm_sched.controller import Controller
from slurm_sched.errors import (
    BackendUnavailableError,
    ClusterMisreadError,
    InputError,
    SlurmCommandError,
)
from slurm_sched.model import ActionResult
from slurm_sched.policy import registry
from slurm_sched.protocol.settings_file import atomic_write_json
from slurm_sched.service.config import ServiceConfig, load_config
from slurm_sched.service.decision_log import DecisionLog
from slurm_sched.service.metrics import SchedulerMetrics, serve_metrics
from slurm_sched.service.reconcile import ReconcileReport, reconcile
from slurm_sched.service.safety import SafePolicy
from slurm_sched.service.sd_notify import Notifier
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.pyslurm_runner import make_runner
from slurm_sched.slurm.runner import CommandRunner, DryRunRunner

log = logging.getLogger(__name__)

#: Placing actions: their placement is what shadow mode compares with Slurm's.
_PLACING = ("start", "share", "migrate", "reconfigure")
#: Config fields a SIGHUP applies; every other change needs a restart.
RELOADABLE = ("policy", "policy_options", "safety", "period_s", "observability.log_level")


@dataclass
class ShadowTracker:
    """Shadow mode: the policy's would-be placements against the runs Slurm actually started.

    A job's latest would-be placement (its node set) is remembered; when Slurm starts a new run
    of the job (a new start time), the run's nodes are compared with it: ``agreed`` (same
    nodes), ``disagreed``, or ``unpredicted`` (the policy had not placed the job). Runs that
    were going on when the daemon started are not compared.
    """

    predicted: dict[str, frozenset[str]] = field(default_factory=dict)
    compared_runs: dict[str, float] = field(default_factory=dict)
    totals: Counter[str] = field(default_factory=Counter)
    started: bool = False

    def update(
        self, results: list[ActionResult], slurm_jobs: dict[str, SlurmJob], managed: set[str]
    ) -> Counter[str]:
        """Fold one cycle in; returns this cycle's counts."""
        for r in results:
            if r.ok and r.action.kind in _PLACING:
                nodes = r.action.placement.nodes  # type: ignore[union-attr]
                self.predicted[r.action.job_id] = frozenset(nodes)
        cycle: Counter[str] = Counter()
        for jid, job in slurm_jobs.items():
            if jid not in managed or not job.holds_resources or job.start_time_s <= 0:
                continue
            if self.compared_runs.get(jid) == job.start_time_s:
                continue
            self.compared_runs[jid] = job.start_time_s
            if not self.started:
                continue  # running before we looked
            asked = self.predicted.pop(jid, None)
            if asked is None:
                cycle["unpredicted"] += 1
            elif asked == frozenset(job.nodes):
                cycle["agreed"] += 1
            else:
                cycle["disagreed"] += 1
                log.info("shadow: job %s runs on %s, the policy chose %s", jid,
                         ",".join(job.nodes), ",".join(sorted(asked)))
        for jid in [j for j in self.predicted if j not in managed]:
            del self.predicted[jid]  # finished or gone
        self.started = True
        self.totals.update(cycle)
        return cycle


class Daemon:
    """The scheduler service (see the module docstring).

    Args:
        config: the validated configuration.
        config_path: the file it came from (re-read on SIGHUP); None: no reload.
        runner: Slurm command runner (tests pass a recorded fake); default: built from the
            config (``slurm_conf`` / ``mini_cluster`` environment, ``command_timeout_s``).
        notifier: systemd notifications (default: from ``NOTIFY_SOCKET``).
        once: reconcile, run one cycle, and return.
        max_internal_errors: unexpected exceptions in a row before the daemon gives up.
    """

    def __init__(
        self,
        config: ServiceConfig,
        *,
        config_path: str | Path | None = None,
        runner: CommandRunner | None = None,
        notifier: Notifier | None = None,
        once: bool = False,
        max_internal_errors: int = 5,
    ) -> None:
        self.config = config
        self.config_path = Path(config_path) if config_path is not None else None
        self.once = once
        self.max_internal_errors = max_internal_errors
        self.notifier = notifier if notifier is not None else Notifier()
        self.metrics = SchedulerMetrics()
        self.dry_run = config.dry_run
        self.mode = "shadow" if self.dry_run else "live"
        self.policy = self._make_policy(config)
        self.backend = self._make_backend(config, runner)
        self.clock = WallClock(config.period_s)
        self.controller = Controller(self.backend, self.policy, self.clock, self._on_cycle)
        path = config.observability.decision_log
        try:
            self.decisions = DecisionLog(path, self.policy.name) if path is not None else None
        except OSError as exc:
            raise InputError(
                f"cannot open the decision log: {exc.strerror or exc}",
                field="observability.decision_log",
                value=str(path),
            ) from None
        self.shadow = ShadowTracker() if self.dry_run else None
        self.report: ReconcileReport | None = None
        self.metrics_port: int | None = None
        self.errors: Counter[str] = Counter()
        self._cycle_results: list[ActionResult] = []
        self._reload_asked = False
        self._stop_asked = False
        self._last_dry: set[str] = set()
        self.metrics.set_info(policy=self.policy.name, mode=self.mode)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _make_policy(config: ServiceConfig) -> SafePolicy:
        inner = registry.create(config.policy, config.policy_options or None)
        return SafePolicy(inner, config.safety)

    def _make_backend(self, config: ServiceConfig, runner: CommandRunner | None) -> SlurmBackend:
        if runner is None:
            env: dict[str, str] = {}
            if config.mini_cluster is not None:
                cluster = MiniCluster(config.mini_cluster)
                if not cluster.env_file.exists():
                    raise InputError(
                        "no mini cluster there (slurm-sched cluster up starts one)",
                        field="mini_cluster",
                        value=str(config.mini_cluster),
                    )
                env.update(cluster.exported())
                env["SLURM_CONF"] = str(cluster.slurm_conf)
            if config.slurm_conf is not None:
                if not config.slurm_conf.is_file():
                    raise InputError(
                        "no such file", field="slurm_conf", value=str(config.slurm_conf)
                    )
                env["SLURM_CONF"] = str(config.slurm_conf)
            runner = make_runner(config.transport, env, config.command_timeout_s)
        per_gpu = config.max_jobs_per_gpu or (
            self.policy.max_jobs_per_gpu if self.policy.shares_gpus else 1
        )
        return SlurmBackend(
            runner,
            partitions=config.managed_partitions,
            settings_dir=config.job_settings_dir,
            max_jobs_per_gpu=per_gpu,
            start_timeout_s=config.start_timeout_s,
            sinfo_refresh_s=config.node_refresh_s,
            lease_s=config.lease_s,
            dry_run=config.dry_run,
        )

    # ------------------------------------------------------------------ signals
    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop after the cycle in flight; SIGHUP: reload (main thread only)."""
        signal.signal(signal.SIGTERM, self._on_stop_signal)
        signal.signal(signal.SIGINT, self._on_stop_signal)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping after the current cycle", signal.Signals(signum).name)
        self.stop()

    def _on_hup(self, _signum: int, _frame: FrameType | None) -> None:
        self._reload_asked = True
        self.clock.poke()

    def stop(self) -> None:
        self._stop_asked = True
        self.clock.stop()

    # ------------------------------------------------------------------ main loop
    def run(self) -> int:
        """Serve until stopped; returns the exit code: 0 clean, 1 too many internal errors,
        2 a misread cluster (:class:`~slurm_sched.errors.ClusterMisreadError`: an unsupported
        Slurm release, a garbled document, no node in the managed partitions)."""
        cfg = self.config
        log.info(
            "slurm-sched %s daemon: policy %s, partitions %s, lease %gs, period %gs, settings %s",
            self.mode,
            self.policy.name,
            ",".join(cfg.managed_partitions),
            cfg.lease_s,
            cfg.period_s,
            cfg.job_settings_dir,
        )
        server = None
        obs = cfg.observability
        if obs.metrics and obs.metrics_port is not None:
            try:
                server = serve_metrics(self.metrics, obs.metrics_host, obs.metrics_port)
            except OSError as exc:
                raise InputError(
                    f"cannot serve /metrics on {obs.metrics_host}: {exc.strerror or exc}",
                    field="observability.metrics_port",
                    value=obs.metrics_port,
                ) from None
            self.metrics_port = int(server.server_address[1])
            log.info("metrics on http://%s:%d/metrics", obs.metrics_host, self.metrics_port)
        self._write_status()
        try:
            version = self.backend.slurm_version()
            log.info("Slurm %s (data_parser %s)", version, version.data_parser)
            if not self._reconcile():
                # stopped while waiting for slurmctld (0), or --once could not reach it (1)
                return 0 if self._stop_asked else 1
            self.notifier.ready(f"{self.mode}: policy {self.policy.name}")
            return self._loop()
        except ClusterMisreadError as exc:
            # never schedule on a cluster we cannot read; the leases hand the jobs to Slurm
            log.error("refusing to run: %s", exc)
            self.errors["misread"] += 1
            self.metrics.count_error("misread")
            if self.decisions is not None:
                self.decisions.event(time.time(), "refused", error=str(exc))
            return 2
        finally:
            self.metrics.up = 0
            self.notifier.stopping()
            if self.decisions is not None:
                self.decisions.event(time.time(), "stop", errors=dict(self.errors))
                self.decisions.close()
            if server is not None:
                server.shutdown()
                server.server_close()
            log.info("stopped (errors: %s)", dict(self.errors) or "none")

    def _write_status(self) -> None:
        """``<state_dir>/daemon.json``: pid, mode, policy and the /metrics address of this
        process (for admins and scripts; a failure to write it is only logged)."""
        cfg = self.config
        doc = {
            "pid": os.getpid(),
            "mode": self.mode,
            "policy": self.policy.name,
            "started_at": time.time(),
            "metrics": None
            if self.metrics_port is None
            else f"http://{cfg.observability.metrics_host}:{self.metrics_port}/metrics",
            "decision_log": str(cfg.observability.decision_log or "") or None,
        }
        try:
            atomic_write_json(cfg.state_dir / "daemon.json", doc)
        except OSError as exc:
            log.warning("cannot write %s: %s", cfg.state_dir / "daemon.json", exc)

    def _reconcile(self) -> bool:
        """Reconcile, retrying every period while slurmctld does not answer (once with
        ``--once``); False if it did not happen."""
        self.notifier.status("reconciling with Slurm")
        while not self._stop_asked:
            try:
                report = reconcile(self.backend)
            except ClusterMisreadError:
                raise
            except (BackendUnavailableError, SlurmCommandError, SlurmJsonError) as exc:
                self._count_error(exc)
                if self.once:
                    return False
                self.notifier.watchdog(force=True)
                self._wait(None)
                continue
            self.report = report
            verb = "would" if self.dry_run else "did"
            log.info("reconcile (%s): %s", verb, report.summary())
            for jid, err in sorted(report.failed.items()):
                log.warning("reconcile: job %s: %s", jid, err)
            for what in ("resumed", "released", "leased"):
                self.metrics.add("reconciled", what, len(getattr(report, what)))
            if self.decisions is not None:
                self.decisions.event(time.time(), "reconcile", dry_run=self.dry_run,
                                     **report.as_dict())
            self._log_notices(time.time())
            self._log_dry_commands()
            return True
        return False

    def _loop(self) -> int:
        internal = 0
        while not self._stop_asked:
            if self._reload_asked:
                self._reload_asked = False
                self.reload()
            t0 = time.monotonic()
            now = self.clock.now()
            wake: float | None = None
            self._cycle_results = []
            try:
                results, wake = self.controller.cycle(now)
                internal = 0
            except ClusterMisreadError:
                raise
            except (BackendUnavailableError, SlurmCommandError, SlurmJsonError) as exc:
                self._count_error(exc)
                results = []
            except Exception:  # a bug (policy or backend): logged, counted, survived a while
                internal += 1
                self.errors["internal"] += 1
                self.metrics.count_error("internal")
                log.exception("cycle failed (%d in a row)", internal)
                if internal >= self.max_internal_errors:
                    log.error("giving up after %d internal errors in a row", internal)
                    return 1
                results = []
            self._after_cycle(now, results, time.monotonic() - t0)
            if self.once:
                break
            self._wait(wake)
        return 0

    def _wait(self, wake_at_s: float | None) -> None:
        """Until the next cycle is due (period or the policy's timer), pinging the watchdog."""
        deadline = self.clock.now() + self.config.period_s
        if wake_at_s is not None:
            deadline = min(deadline, max(self.clock.now(), wake_at_s))
        step = self.notifier.watchdog_s / 4 if self.notifier.watchdog_s else None
        while not self._stop_asked and not self._reload_asked:
            now = self.clock.now()
            if now >= deadline:
                break
            until = deadline if step is None else min(deadline, now + step)
            self.clock.wait(until)
            self.notifier.watchdog()

    # ------------------------------------------------------------------ per cycle
    def _on_cycle(self, now_s: float, results: list[ActionResult]) -> None:
        """Controller hook: the decision log (results, their commands, safety refusals)."""
        self._cycle_results = results
        refusals = list(self.policy.refusals)
        self.metrics.count_refusals(len(refusals))
        for action, why in refusals:
            log.info("safety: dropped %s %s: %s", action.kind, action.job_id, why)
        if self.decisions is not None:
            self.decisions.record(
                now_s,
                results,
                commands=self.backend.last_commands if results else None,
                refusals=refusals,
                dry_run=self.dry_run,
            )

    def _log_notices(self, now_s: float) -> None:
        """The backend's notices (an operator's hold or release, a node drained or back, a start
        Slurm did not carry out, a changed time limit, a job's end) as decision-log events."""
        for name, fields in self.backend.take_notices():
            if self.decisions is not None:
                self.decisions.event(now_s, name, **fields)

    def _after_cycle(self, now_s: float, results: list[ActionResult], latency_s: float) -> None:
        self._log_notices(now_s)
        self.metrics.observe_cycle(latency_s, results)
        snap = self.backend.last_snapshot
        if snap is not None:
            self.metrics.observe_snapshot(snap)
        stats = self.backend.stats
        self.metrics.set_counts(
            "lease_renewals", {"ok": stats.lease_renewals, "failed": stats.lease_failures}
        )
        self.notifier.watchdog()
        if self.shadow is not None:
            managed = {v.job_id for v in snap.jobs} if snap is not None else set()
            cycle = self.shadow.update(results, self.backend.slurm_jobs, managed)
            for outcome in ("agreed", "disagreed", "unpredicted"):
                self.metrics.add("shadow", outcome, cycle[outcome])
            lines = self._log_dry_commands()
            t = self.shadow.totals
            log.info(
                "shadow cycle: %d action(s), %d command line(s); placements this cycle: agreed "
                "%d, disagreed %d, unpredicted %d (total agreed %d, disagreed %d, unpredicted %d)",
                len(results), lines, cycle["agreed"], cycle["disagreed"], cycle["unpredicted"],
                t["agreed"], t["disagreed"], t["unpredicted"],
            )
            if self.decisions is not None and (results or sum(cycle.values())):
                self.decisions.event(now_s, "shadow", dry_run=True, cycle=dict(cycle),
                                     total=dict(t))

    def _log_dry_commands(self) -> int:
        """Shadow mode: log the command lines a live daemon would have run (lines already
        logged the cycle before are counted, not repeated); returns how many there were."""
        runner = self.backend.runner
        if not isinstance(runner, DryRunRunner):
            return 0
        lines = runner.drain()
        repeated = 0
        for line in lines:
            if line in self._last_dry:
                repeated += 1
            else:
                log.info("would run: %s", line)
        if repeated:
            log.info("would run %d more line(s) as in the cycle before", repeated)
        self._last_dry = set(lines)
        return len(lines)

    def _count_error(self, exc: Exception) -> None:
        kind = "unavailable" if isinstance(exc, BackendUnavailableError) else "slurm"
        self.errors[kind] += 1
        self.metrics.count_error(kind)
        log.warning("cycle failed (%s, %d so far): %s", kind, self.errors[kind], exc)
        self.notifier.status(f"{self.mode}: Slurm error: {str(exc)[:200]}")

    # ------------------------------------------------------------------ reload
    def reload(self) -> bool:
        """Re-read the config file; apply the fields in :data:`RELOADABLE`. False if the file
        is unusable (the running config stays)."""
        if self.config_path is None:
            log.warning("SIGHUP: no config file to reload")
            return False
        self.notifier.reloading()
        try:
            new = load_config(self.config_path)
            policy = self._make_policy(new) if _policy_changed(self.config, new) else None
        except InputError as exc:
            log.error("reload refused, keeping the running config: %s", exc.one_line())
            self.notifier.ready()
            return False
        kept = _restart_only_changes(self.config, new)
        for name in kept:
            log.warning("reload: %s changed; that takes a restart (kept the running value)", name)
        if policy is not None:
            if policy.shares_gpus != self.policy.shares_gpus and new.max_jobs_per_gpu is None:
                log.warning(
                    "reload: %s %s GPUs; jobs per GPU stay %d until a restart",
                    policy.name,
                    "shares" if policy.shares_gpus else "does not share",
                    self.backend.max_jobs_per_gpu,
                )
            self.policy = policy
            self.controller.policy = policy
            if self.decisions is not None:
                self.decisions.policy = policy.name
            self.metrics.set_info(policy=policy.name, mode=self.mode)
            log.info("reload: policy %s with safety %s", policy.name, new.safety)
        self.clock.period_s = new.period_s
        logging.getLogger("slurm_sched").setLevel(new.observability.log_level)
        self.config = new.model_copy(update={k: getattr(self.config, k) for k in kept})
        if self.decisions is not None:
            self.decisions.event(time.time(), "reload", policy=self.policy.name, kept=kept)
        self.notifier.ready()
        return True


def _policy_changed(old: ServiceConfig, new: ServiceConfig) -> bool:
    return (old.policy, old.policy_options, old.safety) != (
        new.policy,
        new.policy_options,
        new.safety,
    )


def _restart_only_changes(old: ServiceConfig, new: ServiceConfig) -> list[str]:
    """Top-level fields that differ and cannot change at run time."""
    out = []
    for name in ServiceConfig.model_fields:
        if name in RELOADABLE:
            continue
        a, b = getattr(old, name), getattr(new, name)
        if name == "observability":
            a = a.model_copy(update={"log_level": b.log_level})
        if a != b:
            out.append(name)
    return out
