"""Rubick's execution plans and performance model, the measured world it is evaluated in, and the
``rubick`` progress model.

Paper: Zhang et al., "Rubick: Exploiting Job Reconfigurability for Deep Learning Cluster
Scheduling" (arXiv; published at MLSys'25 as Morphling). Spec: ``shared/specs/rubick.md`` §2, §6.

The modules, in order of dependence (:mod:`.hashing` and :mod:`.shapes` underneath):

1. **Models** (:mod:`.models`, :data:`~.models.MODELS`): the seven Transformer models of the paper's
   Table 2 plus T5-3B (Fig. 8) and LLaMA-2-7B at batch 16 (Fig. 7), with their constants (P, b, s,
   h, l, heads).
2. **Plans** (:mod:`.plans`, :class:`~.plans.Plan`): DP (``ga``: plain data parallel, gradient
   accumulation added when the micro-batch does not fit), ZeRO-2 (``zero-dp``), ZeRO-Offload
   (``zero-offload``), each with or without gradient checkpointing (``-gc``), and Megatron 3D
   ``PP-TP-DP`` (``2-4-4``, optionally ``-gc``). :func:`~.memory.enumerate_plans` (:mod:`.memory`)
   is the plan space of one placement with the memory rules of spec §2.6 (the analytic estimator,
   capped by the artifact's micro-batch limits).
3. **Performance model** (:mod:`.perf_model`; paper Eq. 1, spec §2.2): ``T_iter = T_cc + T_oo +
   k_const`` with the L^k overlap function, vectorised over configurations
   (:func:`~.perf_model.predict_ms`), fitted with scipy on profiling samples by minimising the RMSLE
   (:func:`~.perf_model.fit_model`).
4. **The measured world** (:mod:`.measured`, :class:`~.measured.MeasuredCatalog`, with the profiling
   samples and the models fitted on them): the authors' measured iteration times per (plan,
   placement) (``data/rubick/traces``). The simulated cluster runs jobs at exactly these times; a
   configuration that was never measured counts as infeasible (out of memory or not run). CPU
   threads change only ZeRO-Offload plans, by the fitted model's ratio.
5. **Predictors** (:mod:`.predictors`): :class:`~.predictors.OraclePredictor` (the measured tables;
   the micro-benchmarks of spec §8.17-18 use it) and :class:`~.predictors.FittedPredictor` (the
   paper's way: the fitted model, plus online refits as jobs report iteration times).
6. What Rubick knows of a job (:mod:`.job_info`), and the ``rubick`` progress model
   (:mod:`.world_speed`): a job's speed under its current plan, placement and CPUs relative to its
   requested configuration.

Units: the profiling data and the artifact's bandwidth constants use milliseconds, parameter
counts in Mi (2^20) and bandwidths in "GB/s" applied to MB (2^20 bytes) per ms; the model keeps
those units internally (``*_ms``) so the fitted k's are comparable with the artifact's. Public
predictors return seconds. Deviations from the paper are listed in ``docs/reproductions/rubick.md``.
"""
