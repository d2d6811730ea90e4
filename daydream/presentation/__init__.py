"""Presentation: results rendered for people. ``terminal`` prints them as rich tables that fit the terminal's width,
``page`` writes the self-contained HTML report (``daydream report``) and ``plots`` its figures (matplotlib, Agg).
Each reads a result's fields (:mod:`daydream.api`); none computes a prediction. ``--json`` output is a result's own
``to_dict()``.
"""
