"""From a config and its dataset to the work: the lazy task stream and its ids.

==================  ==========================================================================
``plan``            config x dataset -> the lazy task stream; task ids, run ids, template hashes
``self_preference`` the systems behind an item; which judge is kept off which item
==================  ==========================================================================

``plan``'s dry run (tokens, cost and time before anything is sent) prepares every task as a run
would, so it lives with the run: :mod:`judge_engine.running.estimate`.
"""
