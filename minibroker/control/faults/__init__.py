"""Fault injection: rules an operator sets over the control plane or a ``--faults`` file,
matched against requests by the dispatcher and against named points of the broker's work.

``rules`` (what a rule is, when it fires: no I/O), ``subjects`` (what a request names),
``error_answers`` (an error answer in any API's shape), ``actions`` (carrying a rule out).

Imports: as ``control``.
"""
