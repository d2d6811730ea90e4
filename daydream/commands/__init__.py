"""The commands people type: ``cli`` (``daydream run``, ``simulate``, ``compare``, ``report``, ... - argument parsing,
exit codes and output, thin over :mod:`daydream.api`) and ``repl`` (``daydream repl``: the interactive loop over one
graph). Nothing below imports them.
"""
