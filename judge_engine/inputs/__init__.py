"""Reading the job a user wrote: the first stage of the pipeline.

==================  ==========================================================================
``config``          the config models (frozen, closed) and the one merge: defaults < file < CLI;
                    where every config key is validated
``config_file``     PyYAML's home: a config file read as UTF-8, its YAML events walked before it
                    is built, its values checked
``dataset``         readers (JSONL, CSV, Parquet), field mapping, the one validating scan
==================  ==========================================================================

Templates are read by the protocols that render them (:mod:`judge_engine.protocols.templating`).
"""
