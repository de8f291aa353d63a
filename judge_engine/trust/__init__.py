"""How far a judge's verdicts can be trusted, and what is decided with them.

==================  ==========================================================================
``decisions``       an item's decision over its requests (annotators, repeats, orders) and its
                    ``<judge>:item`` outcome line
``jury``            juries: checking a panel, aggregating its jurors' votes, its outcome lines
``calibration``     :func:`calibrate`: judged rows with human labels -> a cascade's thresholds
                    with a guarantee of agreement with humans
``thresholds``      THE THRESHOLDS FILE a cascade's config names: versioned, written atomically
``cascade/``        a cascade of judges (Trust or Escalate): stages, state, router, outcome
                    lines, calibration rows from a run, what a person reads of it
==================  ==========================================================================

A verdict's confidence is read by its protocol (:mod:`judge_engine.protocols.confidence`); the
statistics of the guarantee are :mod:`judge_engine.stats.risk_control`.
"""
