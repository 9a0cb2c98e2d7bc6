"""Rubick's performance model (paper Eq. 1, spec ``shared/specs/rubick.md`` §2.2): ``T_iter = T_cc +
T_oo + k_const`` with the L^k overlap function, vectorised over configurations
(:func:`predict_ms`), fitted with scipy on profiling samples by minimising the RMSLE
(:func:`fit_model`).

Units: milliseconds, parameter counts in Mi (2^20) and bandwidths in "GB/s" applied to MB (2^20
bytes) per ms, as the profiling data and the artifact's constants use them, so the fitted k's
are comparable with the artifact's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from slurm_sched.perf.rubick.memory import accumulation_steps
from slurm_sched.perf.rubick.models import MIB, ModelSpec
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape, shape_key

log = logging.getLogger(__name__)
BYTES_PER_ELEM = 4  # fp32 gradients / activations / offload traffic (spec §2.4)


PARAM_NAMES = ("k_bwd", "k_sync", "k_opt", "k_opt_off", "k_const", "k_off", "k_swap")
#: Fit bounds of spec §2.9 (ms units).
LOWER = np.array([0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
UPPER = np.array([10.0, 60.0, 10.0, 100.0, 1e4, 60.0, 60.0])
#: Defaults for unidentifiable parameters when fewer than 7 samples exist (spec §2.5 [R]).
DEFAULT_FIXED = {"k_sync": 2.0, "k_off": 2.0, "k_swap": 2.0}
#: Inter-node bandwidth constants in the artifact's units (§2.8: 2 for DP-family groups,
#: 20 for 3D groups); the profiling samples are all single-node, so these are not fitted.
B_INTER_DP = 2.0
B_INTER_3D = 20.0


def overlap(x: np.ndarray | float, y: np.ndarray | float, k: float) -> np.ndarray:
    """Pollux's overlap function f^k(x, y) = (x^k + y^k)^(1/k), computed without overflow."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m = np.maximum(x, y)
    safe = np.where(m > 0, m, 1.0)
    r = (x / safe) ** k + (y / safe) ** k
    return np.where(m > 0, safe * r ** (1.0 / k), 0.0)


@dataclass(frozen=True)
class ForwardProfile:
    """Profiled forward times: (group, per-GPU micro-batch, ms) for one GPU holding every layer.

    Groups are ``offload`` (ZeRO-Offload plans, whose forward also fetches parameters) and
    ``dp`` (the others). A size that was not profiled scales linearly from the nearest profiled
    size of the same group (paper §4.1), or of the other group if it has none."""

    points: tuple[tuple[str, float, float], ...]

    def fwd_ms(self, micro: float, offload: bool = False) -> float:
        if not self.points:
            raise ValueError("empty forward profile")
        group = "offload" if offload else "dp"
        pts = [(mu, f) for g, mu, f in self.points if g == group] or [
            (mu, f) for _, mu, f in self.points]
        mu0, f0 = min(pts, key=lambda p: (abs(math.log(p[0] / micro)), p[0]))
        return f0 * micro / mu0


# Feature columns of one configuration (all ms unless noted).
_F_FWD, _F_A, _F_GC, _F_DP, _F_TPPP, _F_OPT, _F_OFFOPT, _F_TOFF, _F_ISOFF = range(9)
N_FEATURES = 9


def features(model: ModelSpec, plan: Plan, shape: Shape, cpus_per_gpu: float,
             fwd: ForwardProfile | float) -> np.ndarray | None:
    """The k-independent terms of Eq. 1 for one configuration, or None if the plan cannot run
    on the shape (batch split, GPU count). ``fwd`` is a profile or a measured T_fwd (ms) of
    this exact configuration (profiling samples)."""
    g = sum(shape)
    ps = model.ps
    multi_node = len(shape) > 1
    row = np.zeros(N_FEATURES)
    if plan.is_3d:
        t, p, d = plan.tp, plan.pp, plan.dp
        if t * p * d != g:
            return None
        steps = accumulation_steps(model, plan, g)
        if steps is None:
            return None
        m, mu = steps
        k_node = min(shape)
        if isinstance(fwd, ForwardProfile):
            # t_p * g_p / p * (m + p - 1) with time linear in layers, batch and TP shard
            t_fwd = fwd.fwd_ms(mu) / (t * p) * (m + p - 1)
        else:
            t_fwd = float(fwd)
        b_dp = model.b_intra if (not multi_node or t * d <= k_node) else B_INTER_3D
        b_pp = B_INTER_3D if multi_node else model.b_intra
        v_dp = BYTES_PER_ELEM * 2.0 * ps * (d - 1) / (d * t * p)
        sh = model.seq * model.hidden
        v_tp = BYTES_PER_ELEM * 4 * 2 * (t - 1) * model.batch * sh * model.layers / (d * t) / MIB
        v_pp = BYTES_PER_ELEM * 2 * p * model.batch * sh / (d * t) / MIB if p > 1 else 0.0
        row[_F_FWD] = t_fwd
        row[_F_A] = 1.0
        row[_F_DP] = v_dp / b_dp
        row[_F_TPPP] = v_tp / model.b_intra + v_pp / b_pp
        row[_F_OPT] = ps / (t * p)
        row[_F_ISOFF] = 0.0
    else:
        steps = accumulation_steps(model, plan, g)
        if steps is None:
            return None
        a, mu = steps
        t_f = fwd.fwd_ms(mu, plan.offload) if isinstance(fwd, ForwardProfile) else float(fwd)
        b_dp = B_INTER_DP if multi_node else model.b_intra
        row[_F_FWD] = t_f
        row[_F_A] = a
        row[_F_DP] = BYTES_PER_ELEM * 2.0 * ps * (g - 1) / g / b_dp
        row[_F_OPT] = ps if plan.family == "dp" else ps / g
        if plan.offload:
            row[_F_ISOFF] = 1.0
            row[_F_OFFOPT] = ps / (g * max(cpus_per_gpu, 1e-9))
            row[_F_TOFF] = BYTES_PER_ELEM * ps / (g * model.b_pcie)
    row[_F_GC] = 1.0 if plan.gc else 0.0
    return row


def predict_parts_ms(theta: np.ndarray, feats: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T_cc, T_oo and T_iter (Eq. 1) for every row of ``feats`` (shape (n, N_FEATURES));
    theta in PARAM_NAMES order."""
    k_bwd, k_sync, k_opt, k_opt_off, k_const, k_off, k_swap = theta
    f = feats
    t_f = f[:, _F_FWD]
    a = f[:, _F_A]
    t_b = k_bwd * t_f + f[:, _F_GC] * t_f  # GC recomputes one forward (paper §4.1)
    t_dp = f[:, _F_DP]
    t_cc = a * t_f + (a - 1.0) * t_b + overlap(t_b, t_dp, k_sync) + f[:, _F_TPPP]
    is_off = f[:, _F_ISOFF] > 0.5
    t_opt = np.where(is_off, k_opt_off * f[:, _F_OFFOPT], k_opt * f[:, _F_OPT])
    t_off = f[:, _F_TOFF]
    t_oo = np.where(is_off, overlap(t_dp, t_off, k_off) + overlap(t_opt, t_off, k_swap), t_opt)
    return t_cc, t_oo, t_cc + t_oo + k_const


def predict_ms(theta: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """Eq. 1 for every row of ``feats`` (shape (n, N_FEATURES)); theta in PARAM_NAMES order."""
    return predict_parts_ms(theta, feats)[2]


def _overlap_grads(x: np.ndarray, y: np.ndarray, k: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f^k(x, y) of :func:`overlap` and its derivatives by x and by k (elementwise).

    With m = max(x, y), u = x/m, v = y/m and S = u^k + v^k: f = m S^(1/k),
    df/dx = u^(k-1) S^(1/k - 1) and df/dk = f (-ln S / k^2 + (u^k ln u + v^k ln v) / (k S)),
    taking 0 ln 0 = 0; all three are 0 where x = y = 0."""
    m = np.maximum(x, y)
    pos = m > 0
    safe = np.where(pos, m, 1.0)
    u, v = x / safe, y / safe
    uk, vk = u ** k, v ** k
    big_s = np.where(pos, uk + vk, 1.0)  # >= 1 where pos (the larger of u, v is 1)
    f = np.where(pos, safe * big_s ** (1.0 / k), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_x = np.where(pos, np.where(u > 0, u ** (k - 1.0), 0.0) * big_s ** (1.0 / k - 1.0), 0.0)
        ulog = np.where(u > 0, uk * np.log(np.where(u > 0, u, 1.0)), 0.0)
        vlog = np.where(v > 0, vk * np.log(np.where(v > 0, v, 1.0)), 0.0)
    d_k = np.where(pos, f * (-np.log(big_s) / k**2 + (ulog + vlog) / (k * big_s)), 0.0)
    return f, d_x, d_k


def predict_ms_jac(theta: np.ndarray, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`predict_ms` and its Jacobian by theta (shape (n, 7), columns in PARAM_NAMES
    order): the analytic gradient that spares the fit's least squares a finite-difference
    Jacobian (7 extra model evaluations per step)."""
    k_bwd, k_sync, k_opt, k_opt_off, k_const, k_off, k_swap = theta
    f = feats
    t_f = f[:, _F_FWD]
    a = f[:, _F_A]
    t_b = k_bwd * t_f + f[:, _F_GC] * t_f
    t_dp = f[:, _F_DP]
    sync, sync_dx, sync_dk = _overlap_grads(t_b, t_dp, k_sync)
    t_cc = a * t_f + (a - 1.0) * t_b + sync + f[:, _F_TPPP]
    is_off = f[:, _F_ISOFF] > 0.5
    t_opt = np.where(is_off, k_opt_off * f[:, _F_OFFOPT], k_opt * f[:, _F_OPT])
    t_off = f[:, _F_TOFF]
    off, _, off_dk = _overlap_grads(t_dp, t_off, k_off)
    swap, swap_dx, swap_dk = _overlap_grads(t_opt, t_off, k_swap)
    t_oo = np.where(is_off, off + swap, t_opt)
    jac = np.zeros((len(f), 7))
    jac[:, 0] = (a - 1.0) * t_f + sync_dx * t_f
    jac[:, 1] = sync_dk
    jac[:, 2] = np.where(is_off, 0.0, f[:, _F_OPT])
    jac[:, 3] = np.where(is_off, swap_dx * f[:, _F_OFFOPT], 0.0)
    jac[:, 4] = 1.0
    jac[:, 5] = np.where(is_off, off_dk, 0.0)
    jac[:, 6] = np.where(is_off, swap_dk, 0.0)
    return t_cc + t_oo + k_const, jac


@dataclass(frozen=True)
class ProfileSample:
    """One profiled run: configuration, measured forward (ms, None if unknown) and T_iter (ms)."""

    plan: Plan
    shape: Shape
    cpus_per_gpu: float
    iter_ms: float
    fwd_ms: float | None = None
    #: the profiled components (ms) where known: T_cc and the T_opt block (T_oo)
    cc_ms: float | None = None
    opt_ms: float | None = None


class InsufficientProfileError(ValueError):
    """Fewer than 7 samples, or fewer than 3 with ZeRO-Offload (paper §4.3)."""


@dataclass
class FitResult:
    theta: np.ndarray
    mode: str  # "full": all 7 k's fitted; "defaults": some fixed at DEFAULT_FIXED
    message: str
    rmsle: float
    train_rel_err: tuple[float, ...] = ()

    @property
    def params(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(PARAM_NAMES, self.theta, strict=True)}


def sample_forward(model: ModelSpec, s: ProfileSample, fwd: ForwardProfile) -> float | None:
    """A sample's own measured forward if it is plausible (within 3x of the profile), else
    None (use the profile)."""
    if not s.fwd_ms or s.plan.is_3d:
        return None
    est = fwd.fwd_ms(model.batch / sum(s.shape), s.plan.offload)
    return s.fwd_ms if 1 / 3 <= s.fwd_ms / est <= 3 else None


def fit_model(model: ModelSpec, samples: Sequence[ProfileSample], fwd: ForwardProfile, *,
              strict: bool = True, restarts: int = 20, seed: int = 0,
              start: np.ndarray | None = None, quiet: bool = False,
              loss: str = "iter") -> FitResult:
    """Fit the 7 k's by minimising the RMSLE of T_iter (paper §4.3) with scipy's bounded
    least squares from several deterministic starting points (spec §2.9: RMSLE has flat
    directions).

    With fewer than 7 samples or fewer than 3 ZeRO-Offload samples, ``strict`` raises
    :class:`InsufficientProfileError`; otherwise k_sync, k_off and k_swap are fixed at 2 and the
    rest fitted (spec §2.5 [R]); the result's ``mode`` and ``message`` say so.

    ``loss="components"`` adds the RMSLE of T_cc and of the T_opt block (T_oo) over the
    samples that carry them (spec §2.5: the artifact's three-term loss; finite-difference
    Jacobian); ``"iter"`` (default) fits T_iter alone.
    """
    if loss not in ("iter", "components"):
        raise ValueError(f"loss must be 'iter' or 'components', got {loss!r}")
    n_off = sum(s.plan.offload for s in samples)
    enough = len(samples) >= 7 and n_off >= 3
    if not enough and strict:
        raise InsufficientProfileError(
            f"model {model.name!r}: {len(samples)} profiling samples ({n_off} with ZeRO-Offload); "
            "the paper needs >= 7 with >= 3 ZeRO-Offload"
        )
    rows = []
    meas = []
    for s in samples:
        own = sample_forward(model, s, fwd)
        row = features(model, s.plan, s.shape, s.cpus_per_gpu, own if own else fwd)
        if row is None:
            raise ValueError(f"profiling sample {s.plan.code}@{shape_key(s.shape)} cannot run")
        rows.append(row)
        meas.append(s.iter_ms)
    feats = np.array(rows)
    log_meas = np.log(np.array(meas))
    free = np.ones(7, dtype=bool)
    fixed = np.zeros(7)
    if not enough:
        for name, val in DEFAULT_FIXED.items():
            i = PARAM_NAMES.index(name)
            free[i] = False
            fixed[i] = val
        if n_off == 0:  # k_opt_off cannot be identified at all
            i = PARAM_NAMES.index("k_opt_off")
            free[i], fixed[i] = False, 1.0
    lo, hi = LOWER[free], UPPER[free]

    def full(x: np.ndarray) -> np.ndarray:
        th = fixed.copy()
        th[free] = x
        return th

    def resid(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.log(np.maximum(predict_ms(full(x), feats), 1e-9)) - log_meas
        return out

    cc_i = [i for i, s in enumerate(samples) if s.cc_ms and s.opt_ms]
    use_parts = loss == "components" and bool(cc_i)
    if use_parts:
        feats_p = feats[cc_i]
        log_cc = np.log(np.array([samples[i].cc_ms or 1.0 for i in cc_i]))
        log_oo = np.log(np.array([samples[i].opt_ms or 1.0 for i in cc_i]))

        def resid_parts(x: np.ndarray) -> np.ndarray:
            cc, oo, _ = predict_parts_ms(full(x), feats_p)
            return np.concatenate([resid(x), np.log(np.maximum(cc, 1e-9)) - log_cc,
                                   np.log(np.maximum(oo, 1e-9)) - log_oo])

    def jac(x: np.ndarray) -> np.ndarray:
        # d log(max(P, 1e-9)) = dP / P, and 0 where the floor holds
        pred, d = predict_ms_jac(full(x), feats)
        return np.where((pred > 1e-9)[:, None], d[:, free] / np.maximum(pred, 1e-9)[:, None],
                        0.0)

    rng = np.random.default_rng(seed)
    starts = []
    if start is not None:
        starts.append(np.clip(np.asarray(start, dtype=float)[free], lo + 1e-9, hi - 1e-9))
    base = np.array([1.5, 2.0, 0.01, 1.0, 10.0, 2.0, 2.0])[free]
    starts.append(np.clip(base, lo + 1e-9, hi - 1e-9))
    for _ in range(max(0, restarts - len(starts))):
        u = rng.random(len(lo))
        # log-uniform over the positive part of each interval (the scales differ by 1e4)
        lo_pos = np.maximum(lo, 1e-3)
        x = np.exp(np.log(lo_pos) + u * (np.log(hi) - np.log(lo_pos)))
        starts.append(np.clip(x, lo + 1e-9, hi - 1e-9))
    best = None
    for x0 in starts:
        if use_parts:
            r = least_squares(resid_parts, x0, bounds=(lo, hi), method="trf", x_scale="jac",
                              max_nfev=400)
        else:
            r = least_squares(resid, x0, jac=jac, bounds=(lo, hi), method="trf",
                              x_scale="jac", max_nfev=400)
        if best is None or r.cost < best.cost - 1e-12:
            best = r
    assert best is not None
    theta = full(best.x)
    pred = predict_ms(theta, feats)
    rel = tuple(float(abs(p - m) / m) for p, m in zip(pred, meas, strict=True))
    rmsle = float(np.sqrt(np.mean((np.log(pred) - log_meas) ** 2)))
    if enough:
        mode, msg = "full", f"fitted 7 parameters on {len(samples)} samples"
    else:
        fixed_names = [n for n, f in zip(PARAM_NAMES, free, strict=True) if not f]
        mode = "defaults"
        msg = (f"model {model.name!r}: only {len(samples)} samples ({n_off} ZeRO-Offload); "
               f"fixed {', '.join(fixed_names)} at defaults and fitted the rest")
        (log.debug if quiet else log.warning)(msg)
    return FitResult(theta, mode, msg, rmsle, rel)
