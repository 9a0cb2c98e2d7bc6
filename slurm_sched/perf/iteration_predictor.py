"""Iteration predictors for A-SRPT: a random forest on recurring-job ids, and the mean / median
baselines (paper section IV-C-3 and Fig. 9; spec section 2.4).

Every predictor learns from completed jobs, ``observe(group, user, iterations)``, and predicts
``predict(group, user)``. The features are the recurring-job group id and the user id; where a
trace has no group id the workload derives one (``slurm_sched.workloads.a_srpt``).

- :class:`RandomForestPredictor`: ``RandomForestRegressor(n_estimators=100,
  criterion="squared_error", random_state=seed)`` on the two ids, ordinal-encoded in order of
  first appearance in the training data. A job whose group was never seen in the data the forest
  was fitted on is predicted 0 (the paper: it then finishes at once in the virtual instance).
- :class:`MeanPredictor` / :class:`MedianPredictor`: running global mean / median over every
  completed job (the spec's default reading); ``per_group=True`` takes the group's own history and
  falls back to the global value for unseen groups.

Cost inside a simulation (the paper retrains "hourly/daily"): the forest is refitted lazily, at
the first prediction after at least ``max(refit_min, refit_fraction * N)`` new completions (N =
history size; 20 and 2% by default; the first fit too), so refits get rarer as the history grows;
between refits new groups count as unseen. The forest is fitted on the latest ``max_per_pair``
(50) completions of each (group, user) pair, which bounds a fit by the number of pairs rather
than the history length and follows drift (the paper retrains on recent data). Subsampling rows
uniformly instead (``max_samples``) does not work: with ordinal group codes, a tree that
never saw a rare group predicts a neighbouring group's iterations, which can be 1000x off.
For the same reason (a bootstrap sample misses a group of m rows with probability about e^-m)
a prediction averages only the trees whose bootstrap sample held the query's group
(``in_bag_only``, a deviation from a plain ``predict``; ``in_bag_only=False`` restores it).
Predictions of every known (group, user) pair are computed in one batch per fit and cached.

Persistence: with ``path`` set, the constructor loads the saved history from that JSON file (when
it exists) and the predictor rewrites it (atomically) after every fit, so a restarted scheduler
predicts as before. The file holds the history, not a pickled model: the forest is refitted from
it deterministically, which needs no trust in the file and survives scikit-learn upgrades. A file
of another format version or predictor kind is refused with an error naming the field.
"""

from __future__ import annotations

import abc
import heapq
import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.ensemble import RandomForestRegressor

FORMAT = "slurm-sched/asrpt-predictor"
FORMAT_VERSION = 1

Record = tuple[str, str, float]  # (group id, user id, iterations)


class PredictorStateError(ValueError):
    """A saved predictor file cannot be used (wrong format, version or kind)."""


class IterationPredictor(abc.ABC):
    """Base class: history of completed jobs, persistence, the predict/observe API."""

    kind: ClassVar[str]

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, autosave: bool = True
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.autosave = autosave
        self.history: list[Record] = []
        if self.path is not None and self.path.exists():
            self._load_file(self.path)

    # ------------------------------------------------------------------ API
    def observe(self, group: str, user: str, iterations: float) -> None:
        """Record a completed job's true iteration count."""
        if not (iterations >= 0 and math.isfinite(iterations)):
            raise ValueError(f"iterations must be finite and >= 0, got {iterations}")
        self.history.append((str(group), str(user), float(iterations)))
        self._observed(self.history[-1])

    def observe_many(self, records: Iterable[Record]) -> None:
        for g, u, n in records:
            self.observe(g, u, n)

    @abc.abstractmethod
    def predict(self, group: str, user: str) -> float:
        """Predicted iterations (>= 0) of a job of ``group`` submitted by ``user``."""

    def params(self) -> dict[str, Any]:
        """Hyper-parameters saved with the state (checked on load)."""
        return {}

    def _observed(self, rec: Record) -> None:
        """Hook for incremental statistics."""
        return None

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "params": self.params(),
            "history": [[g, u, n] for g, u, n in self.history],
        }

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the state as JSON (atomic replace). Returns the path written."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no path: pass one here or to the constructor")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_json(), f, separators=(",", ":"))
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return target

    def _load_file(self, path: Path) -> None:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise PredictorStateError(f"{path}: cannot read predictor state ({e})") from e
        self.load_json(obj, source=str(path))

    def load_json(self, obj: Any, source: str = "state") -> None:
        """Replace the history with a saved one (after checking format, version and kind)."""
        if not isinstance(obj, dict):
            raise PredictorStateError(f"{source}: predictor state must be a JSON object")
        if obj.get("format") != FORMAT:
            raise PredictorStateError(
                f"{source}: field 'format' = {obj.get('format')!r}: expected {FORMAT!r}")
        if obj.get("version") != FORMAT_VERSION:
            raise PredictorStateError(
                f"{source}: field 'version' = {obj.get('version')!r}: this code reads version "
                f"{FORMAT_VERSION}")
        if obj.get("kind") != self.kind:
            raise PredictorStateError(
                f"{source}: field 'kind' = {obj.get('kind')!r}: this predictor is {self.kind!r}")
        hist = obj.get("history")
        if not isinstance(hist, list):
            raise PredictorStateError(f"{source}: field 'history' must be a list")
        records: list[Record] = []
        for i, row in enumerate(hist):
            if (not isinstance(row, list) or len(row) != 3
                    or not isinstance(row[2], int | float) or row[2] < 0):
                raise PredictorStateError(f"{source}: field 'history[{i}]' = {row!r}: "
                                          "expected [group, user, iterations >= 0]")
            records.append((str(row[0]), str(row[1]), float(row[2])))
        self.history = []
        self._reset()
        for rec in records:
            self.history.append(rec)
            self._observed(rec)
        self._loaded()

    def _reset(self) -> None:
        """Forget derived statistics (before a load)."""
        return None

    def _loaded(self) -> None:
        """Called after a load replaced the history."""
        return None


class RandomForestPredictor(IterationPredictor):
    """Random-forest regression on (group id, user id); unseen groups predict 0."""

    kind = "random-forest"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        n_estimators: int = 100,
        seed: int = 0,
        refit_min: int = 20,
        refit_fraction: float = 0.02,
        max_per_pair: int | None = 50,
        in_bag_only: bool = True,
        autosave: bool = True,
    ) -> None:
        if n_estimators < 1:
            raise ValueError(f"n_estimators must be >= 1, got {n_estimators}")
        if refit_min < 1:
            raise ValueError(f"refit_min must be >= 1, got {refit_min}")
        if not 0 <= refit_fraction <= 1:
            raise ValueError(f"refit_fraction must be in [0, 1], got {refit_fraction}")
        if max_per_pair is not None and max_per_pair < 1:
            raise ValueError(f"max_per_pair must be >= 1 or None, got {max_per_pair}")
        self.n_estimators = n_estimators
        self.seed = seed
        self.refit_min = refit_min
        self.refit_fraction = refit_fraction
        self.max_per_pair = max_per_pair
        self.in_bag_only = in_bag_only
        self._fitted_n = 0
        self._groups: dict[str, int] = {}
        self._users: dict[str, int] = {}
        self._cache: dict[tuple[str, str], float] = {}
        self._model: Any = None
        self._X: np.ndarray = np.empty((0, 2))
        self.fits = 0
        super().__init__(path, autosave=autosave)

    def params(self) -> dict[str, Any]:
        return {"n_estimators": self.n_estimators, "seed": self.seed,
                "max_per_pair": self.max_per_pair, "in_bag_only": self.in_bag_only}

    def _reset(self) -> None:
        self._fitted_n = 0
        self._groups, self._users, self._cache, self._model = {}, {}, {}, None

    def _loaded(self) -> None:
        if self.history:
            self.fit(save=False)

    def due(self) -> bool:
        """True when enough new completions arrived since the last fit."""
        new = len(self.history) - self._fitted_n
        if new <= 0:
            return False
        return new >= max(self.refit_min, math.ceil(self.refit_fraction * len(self.history)))

    def fit(self, *, save: bool = True) -> None:
        """Fit the forest on the whole history now."""
        groups: dict[str, int] = {}
        users: dict[str, int] = {}
        for g, u, _ in self.history:  # codes in order of first appearance
            groups.setdefault(g, len(groups))
            users.setdefault(u, len(users))
        rows = self._training_rows()
        X = np.empty((len(rows), 2), dtype=np.float64)
        y = np.empty(len(rows), dtype=np.float64)
        for i, (g, u, n) in enumerate(rows):
            X[i, 0] = groups[g]
            X[i, 1] = users[u]
            y[i] = n
        model = RandomForestRegressor(
            n_estimators=self.n_estimators, criterion="squared_error",
            random_state=self.seed, n_jobs=1,
        )
        model.fit(X, y)
        self._model, self._groups, self._users, self._X = model, groups, users, X
        self._fitted_n = len(self.history)
        self.fits += 1
        # batch-predict every known pair once
        pairs = sorted({(g, u) for g, u, _ in rows}, key=lambda p: (groups[p[0]], users[p[1]]))
        Xp = np.array([[groups[g], users[u]] for g, u in pairs], dtype=np.float64)
        preds: np.ndarray | list[float] = self._forest_predict(X, Xp) if pairs else []
        self._cache = {p: max(0.0, float(v)) for p, v in zip(pairs, preds, strict=True)}
        if save and self.autosave and self.path is not None:
            self.save()

    def _forest_predict(self, X_train: np.ndarray, Xq: np.ndarray) -> np.ndarray:
        """Mean of the trees; with ``in_bag_only``, of the trees whose bootstrap sample held
        the query's group (all trees when none did)."""
        model = self._model
        if not self.in_bag_only:
            return np.asarray(model.predict(Xq), dtype=float)
        per_tree = np.stack([t.predict(Xq) for t in model.estimators_])  # (trees, queries)
        saw = np.stack([np.isin(Xq[:, 0], X_train[idx, 0])
                        for idx in model.estimators_samples_])
        counts = saw.sum(axis=0)
        inbag = np.where(saw, per_tree, 0.0).sum(axis=0) / np.maximum(counts, 1)
        return np.asarray(np.where(counts > 0, inbag, per_tree.mean(axis=0)), dtype=float)

    def _training_rows(self) -> list[Record]:
        """The history, keeping only the latest ``max_per_pair`` rows of each (group, user)."""
        if self.max_per_pair is None:
            return self.history
        kept: list[Record] = []
        seen: dict[tuple[str, str], int] = {}
        for rec in reversed(self.history):
            key = (rec[0], rec[1])
            c = seen.get(key, 0)
            if c < self.max_per_pair:
                seen[key] = c + 1
                kept.append(rec)
        kept.reverse()
        return kept

    def predict(self, group: str, user: str) -> float:
        if self.due():
            self.fit()
        key = (str(group), str(user))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        gcode = self._groups.get(key[0])
        if gcode is None or self._model is None:
            return 0.0  # unseen group (paper: predict 0)
        ucode = self._users.get(key[1], -1)  # a seen group with a new user
        val = max(0.0, float(self._forest_predict(
            self._X, np.array([[gcode, ucode]], dtype=float))[0]))
        self._cache[key] = val
        return val


class _RunningStat(IterationPredictor):
    """Shared code of the mean and median baselines: O(log N) per completion."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, per_group: bool = False,
                 autosave: bool = True) -> None:
        self.per_group = per_group
        self._all = _Stats()
        self._by_group: dict[str, _Stats] = {}
        super().__init__(path, autosave=autosave)

    def params(self) -> dict[str, Any]:
        return {"per_group": self.per_group}

    def _reset(self) -> None:
        self._all, self._by_group = _Stats(), {}

    def _observed(self, rec: Record) -> None:
        self._all.add(rec[2])
        if self.per_group:
            self._by_group.setdefault(rec[0], _Stats()).add(rec[2])

    def observe(self, group: str, user: str, iterations: float) -> None:
        super().observe(group, user, iterations)
        if self.autosave and self.path is not None:
            self.save()

    @staticmethod
    @abc.abstractmethod
    def stat(stats: _Stats) -> float: ...

    def predict(self, group: str, user: str) -> float:
        st = self._by_group.get(str(group)) if self.per_group else None
        if st is None or st.n == 0:
            st = self._all
        return self.stat(st) if st.n else 0.0


class _Stats:
    """Running sum and two-heap median of a stream of numbers."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self._lo: list[float] = []  # max-heap (negated) of the lower half
        self._hi: list[float] = []  # min-heap of the upper half

    def add(self, v: float) -> None:
        self.n += 1
        self.total += v
        if self._lo and v > -self._lo[0]:
            heapq.heappush(self._hi, v)
        else:
            heapq.heappush(self._lo, -v)
        if len(self._lo) > len(self._hi) + 1:
            heapq.heappush(self._hi, -heapq.heappop(self._lo))
        elif len(self._hi) > len(self._lo):
            heapq.heappush(self._lo, -heapq.heappop(self._hi))

    @property
    def mean(self) -> float:
        return self.total / self.n

    @property
    def median(self) -> float:
        if len(self._lo) > len(self._hi):
            return -self._lo[0]
        return (-self._lo[0] + self._hi[0]) / 2


class MeanPredictor(_RunningStat):
    """Running mean of previous jobs' iterations (global; per group with ``per_group``)."""

    kind = "mean"

    @staticmethod
    def stat(stats: _Stats) -> float:
        return float(stats.mean)


class MedianPredictor(_RunningStat):
    """Running median of previous jobs' iterations (global; per group with ``per_group``)."""

    kind = "median"

    @staticmethod
    def stat(stats: _Stats) -> float:
        return float(stats.median)


PREDICTORS: dict[str, type[IterationPredictor]] = {
    "random-forest": RandomForestPredictor,
    "mean": MeanPredictor,
    "median": MedianPredictor,
}


# ====================================================================== evaluation (Fig. 4/9)
@dataclass(frozen=True)
class PredictionErrors:
    """Errors of one predictor on held-back jobs (iterations)."""

    predictor: str
    jobs: int
    mean_abs_error: float
    median_abs_error: float
    exact_share: float  # |n - n~| < 0.5
    within_10pct_share: float  # |n - n~| <= 0.1 n

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def prediction_errors(name: str, truth: Sequence[float], pred: Sequence[float]) -> PredictionErrors:
    t = np.asarray(truth, dtype=float)
    p = np.asarray(pred, dtype=float)
    err = np.abs(t - p)
    return PredictionErrors(
        predictor=name,
        jobs=len(t),
        mean_abs_error=float(err.mean()) if len(t) else 0.0,
        median_abs_error=float(np.median(err)) if len(t) else 0.0,
        exact_share=float((err < 0.5).mean()) if len(t) else 0.0,
        within_10pct_share=float((err <= 0.1 * t).mean()) if len(t) else 0.0,
    )


def evaluate_split(
    records: Sequence[Record],
    predictors: dict[str, IterationPredictor],
    train_fraction: float = 0.8,
) -> list[PredictionErrors]:
    """Chronological split: train each predictor on the first ``train_fraction`` of ``records``
    (in order), then predict the rest without further training (the paper's protocol)."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    cut = int(len(records) * train_fraction)
    train, test = records[:cut], records[cut:]
    out: list[PredictionErrors] = []
    for name, p in predictors.items():
        p.observe_many(train)
        preds = [p.predict(g, u) for g, u, _ in test]
        out.append(prediction_errors(name, [n for _, _, n in test], preds))
    return out
