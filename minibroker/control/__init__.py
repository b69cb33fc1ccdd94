"""The control plane: the HTTP API (``http``, on the broker's loop, only with
``--control-listener``) and the command line over it (``cli``: ``minibroker faults|clock|requests``)."""
