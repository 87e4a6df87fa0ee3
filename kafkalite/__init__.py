"""Helpers for using kafkalite from other programs' tests.

``kafkalite.testcontainers.KafkaliteContainer`` starts the kafkalite image with the
``testcontainers`` package (``pip install 'kafkalite[testcontainers]'``). The broker itself
is the ``broker`` package; its command is ``kafkalite``.
"""
