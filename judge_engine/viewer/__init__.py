"""``judge-engine view``: a run (or several) audited in the browser, at any size.

The server never loads a run: it answers each page from the runs' indexes (SQL, a page at a
time) and reads only the lines a page shows, by offset. The browser holds one page.

========================  ===============================================================
``catalog.py``            the open runs: their indexes attached to one SQLite connection,
                          their judges, their lines read by offset
``derived.py``            what the viewer derives for itself on a background thread (order
                          indexes, overview figures, attempt counts, the items and their
                          search index), cached in the run's index, refreshed while it runs
``summary.py``            the overview's figures: counts, histograms, consistency
``queries.py``            the task list: filters, sorts and pages as SQL
``verdicts.py``           each protocol's verdict laid out as its users read it (segments)
``custom_card.py``        a custom judge's verdict, from its declared fields
``composed.py``           outcomes made of other tasks' outcomes (a jury's votes), and their parts
``marks.py``              texts with marked spans (segments), quotes found with ``text.locate``
``pages.py``              the JSON documents of the overview, a list page, an item, a transcript
``server.py``             the HTTP server (aiohttp.web), its security headers, ``--check``
``static/``               the page: plain JavaScript modules and a style sheet, no build step
========================  ===============================================================
"""
