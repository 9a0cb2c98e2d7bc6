"""``scontrol show config`` text -> the options of :class:`~.policy.SlurmBackfill`.

Pure text parsing (the policy layer never runs Slurm commands): the caller runs
``scontrol show config`` and passes its output. Lines are ``Key = Value``; other lines (the
``Configuration data as of ...`` header, section titles) are skipped, and of a key given twice
the first line counts. Keys read (slurm.conf(5); multifactor priority:
https://slurm.schedmd.com/priority_multifactor.html; scheduling:
https://slurm.schedmd.com/sched_config.html):

=========================  ======================================================================
key                        option
=========================  ======================================================================
PriorityType               ``priority/basic`` -> every weight 0 (Slurm ignores the weights then)
PriorityWeightAge          ``weight_age``
PriorityWeightJobSize      ``weight_job_size``
PriorityWeightFairshare    ``weight_fairshare``
PriorityMaxAge             ``max_age_s`` (a Slurm time: ``7-00:00:00``)
PriorityFavorSmall         ``favor_small`` (``YES``/``NO``)
PriorityDecayHalfLife      ``decay_half_life_s`` (``00:00:00`` = no decay)
PriorityCalcPeriod         ``calc_period_s``
SchedulerType              ``sched/builtin`` -> ``backfill=False``; ``sched/backfill`` -> True
SchedulerParameters        ``bf_interval=`` (s) -> ``bf_interval_s``; ``bf_window=`` (minutes)
                           -> ``bf_window_s``; ``bf_max_job_test=`` -> ``bf_max_job_test``; the
                           other parameters are not modelled and are skipped
=========================  ======================================================================

A key that is absent gives no option (the policy's default, which is Slurm's default, holds).
A value that cannot be read raises :class:`~slurm_sched.errors.InputError` naming the key and
the value.
"""

from __future__ import annotations

import re

from slurm_sched.errors import InputError
from slurm_sched.model.slurm_time import slurm_duration_s

_UNLIMITED = {"INFINITE", "UNLIMITED"}
_INT = re.compile(r"^\d+$")

_SOURCE = "scontrol show config"
#: The keys read, as slurm.conf(5) spells them.
_KEYS = ("PriorityType", "PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightFairshare",
         "PriorityMaxAge", "PriorityFavorSmall", "PriorityDecayHalfLife", "PriorityCalcPeriod",
         "SchedulerType", "SchedulerParameters")


def _error(key: str, value: str, why: str) -> InputError:
    return InputError(why, source=_SOURCE, field=key, value=value)


def parse_slurm_time_s(key: str, value: str) -> float | None:
    """A Slurm time string in seconds; None for ``INFINITE``/``UNLIMITED``.

    ``7-00:00:00`` (days-hours:minutes:seconds), ``7-12`` (days-hours), ``1:30:00``
    (hours:minutes:seconds), ``30:00`` (minutes:seconds), ``30`` (minutes), as sbatch(1) reads
    ``--time``. Raises :class:`InputError` naming ``key`` and ``value`` otherwise."""
    text = value.strip()
    if text.upper() in _UNLIMITED:
        return None
    try:
        return slurm_duration_s(text)
    except ValueError:
        raise _error(key, value,
                     "not a Slurm time ([days-]hours:minutes:seconds, minutes...)") from None


def _weight(key: str, value: str) -> int:
    if not _INT.match(value):
        raise _error(key, value, "a priority weight is a whole number >= 0")
    return int(value)


def _yes_no(key: str, value: str) -> bool:
    v = value.strip().upper()
    if v in ("YES", "Y", "1", "TRUE"):
        return True
    if v in ("NO", "N", "0", "FALSE"):
        return False
    raise _error(key, value, "expected YES or NO")


def _positive_int(key: str, name: str, value: str) -> int:
    if not _INT.match(value) or int(value) < 1:
        raise _error(key, f"{name}={value}", f"{name} is a whole number >= 1")
    return int(value)


def _config_lines(text: str) -> dict[str, str]:
    """``Key = Value`` pairs of the text, first occurrence of each key, keys in lower case
    (Slurm's keys are case-insensitive: ``scontrol`` prints ``PriorityWeightFairShare``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or " " in key:
            continue
        out.setdefault(key.lower(), value.strip())
    return out


def slurm_backfill_options_from_config(text: str) -> dict[str, object]:
    """The options of the ``slurm-backfill`` policy that ``scontrol show config`` output sets.

    Returns a dict for ``registry.create("slurm-backfill", options)``; only the keys present in
    ``text`` give an option (see the module docstring for the mapping). Raises
    :class:`~slurm_sched.errors.InputError` (``field`` = the Slurm key, ``value`` = its text)
    for a value that cannot be read or a plugin that is not modelled."""
    lowered = _config_lines(text)
    conf = {k: lowered[k.lower()] for k in _KEYS if k.lower() in lowered}
    opts: dict[str, object] = {}
    for key, option in (("PriorityWeightAge", "weight_age"),
                        ("PriorityWeightJobSize", "weight_job_size"),
                        ("PriorityWeightFairshare", "weight_fairshare")):
        if key in conf:
            opts[option] = float(_weight(key, conf[key]))
    for key, option in (("PriorityMaxAge", "max_age_s"),
                        ("PriorityCalcPeriod", "calc_period_s")):
        if key in conf:
            seconds = parse_slurm_time_s(key, conf[key])
            if seconds is None or seconds <= 0:
                raise _error(key, conf[key], "must be a positive time")
            opts[option] = seconds
    if "PriorityDecayHalfLife" in conf:
        half = parse_slurm_time_s("PriorityDecayHalfLife", conf["PriorityDecayHalfLife"])
        opts["decay_half_life_s"] = 0.0 if half is None else half  # 0: usage never decays
    if "PriorityFavorSmall" in conf:
        opts["favor_small"] = _yes_no("PriorityFavorSmall", conf["PriorityFavorSmall"])
    if "PriorityType" in conf:
        ptype = conf["PriorityType"].strip().lower()
        if ptype == "priority/basic":
            # priority/basic orders by submission only, whatever weights the file also lists
            for option in ("weight_age", "weight_job_size", "weight_fairshare"):
                opts[option] = 0.0
        elif ptype != "priority/multifactor":
            raise _error("PriorityType", conf["PriorityType"],
                         "expected priority/basic or priority/multifactor")
    if "SchedulerType" in conf:
        stype = conf["SchedulerType"].strip().lower()
        if stype not in ("sched/backfill", "sched/builtin"):
            raise _error("SchedulerType", conf["SchedulerType"],
                         "expected sched/backfill or sched/builtin")
        opts["backfill"] = stype == "sched/backfill"
    params = conf.get("SchedulerParameters", "").strip()
    if params and params != "(null)":
        for item in params.split(","):
            name, _, value = item.strip().partition("=")
            if name == "bf_interval":
                opts["bf_interval_s"] = float(
                    _positive_int("SchedulerParameters", name, value))
            elif name == "bf_window":
                opts["bf_window_s"] = 60.0 * _positive_int("SchedulerParameters", name, value)
            elif name == "bf_max_job_test":
                opts["bf_max_job_test"] = _positive_int("SchedulerParameters", name, value)
    return opts
