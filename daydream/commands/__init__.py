"""The commands people type, thin over :mod:`daydream.api`: ``cli`` (the top parser, the dispatch, exit codes) and,
one module per group of commands, each with its flags, its call of the API and what it prints: ``predict``
(``simulate``, ``run``, ``compare``, ``report``, ``export``), ``plans`` (``plan``, ``shard``, ``embeddings``),
``scripts`` (``check``, ``list``, ``repl``), ``models`` (``models``, ``validate``, ``calibrate``), ``first_steps``
(``record``, ``demo``); ``arguments`` the flags they share, ``output`` how they print; ``repl`` the interactive loop
over one graph. Nothing below imports them.
"""
