"""The run directory: the product's record and the user's evidence.

==================  ==========================================================================
``records``         THE RUN DIRECTORY'S FORMATS: outcome line, attempt line, manifest; versioned,
                    every past version read
``blocks``          content-addressed message blocks: a request stored once per run, rebuilt
                    byte for byte
``disk``            a disk that refuses (full, read-only, over quota) as a DiskError naming the
                    path; whole-line appends, room held ahead
``store``           the run directory on disk: RunStore (append, lock, spend) and every reader;
                    where an outcome line is written
``index``           index.sqlite: each task's latest outcome and transcript lines by offset
``layout``          a run as a table: the columns, long and wide forms, transcripts
``export``          ``judge-engine export``'s work: CSV/JSONL streamed, Parquet in row groups
``frames``          pandas' home: :func:`load_run`, a run as a DataFrame
==================  ==========================================================================
"""
