"""Leaf helpers every stage may use, and which use no stage: the bottom layer.

==================  ==========================================================================
``naming``          how a message names a judge, a key or a command; the nearest known name of
                    a misspelt one (did you mean ``temperatures``?)
``money``           how an amount of dollars is written, wherever one is printed
``jsonio``          orjson's home: JSON lines, canonical JSON and the content hashes over it
``text``            unidecode's home: transliterate, fold, locate (quotes -> offsets)
``languages``       langcodes' home: language names <-> codes
``redaction``       secrets kept out of URLs, messages and manifests
``parquet``         pyarrow's home: Parquet datasets read in batches, tables written in row groups
``logprobs``        an answer's token log-probs in the one shape every transport reads them into
``families``        model families (openai, anthropic, google...), for self-preference
==================  ==========================================================================
"""
