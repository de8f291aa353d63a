"""Running a job: a session, its engine, and everything a request meets on its way out.

==================  ==========================================================================
``session``         one run or resume: prepare -> endpoints -> execute -> manifest
``estimate``        ``plan``'s dry run: tokens, cost and time per judge, as ranges
``rescore``         the current parser over a run's recorded answers, as a session
``demo``            ``--demo``'s fake servers, one per deployment
``interrupts``      Ctrl-C and SIGTERM during a session
``status``          ``judge-engine status``: how far a run is, without its process
``cancel``          ``judge-engine cancel``: a stopped run's open batches cancelled
``cascade``         a cascaded session's share of the work (hooks, routing, settling)
``batch/``          batch mode: a judge's requests through the provider's batch API
``engine``          feeders, bounded queues, workers, per judge
``task``            one task: prepare -> answer -> parse -> re-ask -> outcome
``attempt``         one provider attempt: lane -> provider -> classify -> transcript line
``runtime``         a judge at run time: how it asks, its deployments, counters, stop
``routing``         several deployments per judge: which one sends a request
``budget``          spending and time limits, checked before each request and batch
``retry``           tenacity's home: the transport retry budget
``cache``           diskcache's home: the answer cache and its content-hash key
``resumption``      what a resumed session skips, leaves alone, and judges again
==================  ==========================================================================

Requests are paced by :mod:`judge_engine.lanes`, sent through :mod:`judge_engine.providers`.
"""
