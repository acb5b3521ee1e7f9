"""Simulated inference engines: the request stream kubesim's serving pods answer, and the
per-pod metrics a real engine would expose for Prometheus.

    behavior.py    how an image's engine behaves (error ratio, time to first token) and the
                   request rate clients offer; the documented defaults
    counting.py    one pod's counters and histogram, grown from a number of new requests
    traffic.py     which pods serve, each pod's share of the stream, accumulated lazily
    exposition.py  the Prometheus text format of every pod's series (`GET /metrics`)

Nothing here runs a loop: requests are counted when someone looks (a scrape, a control call,
a change of the serving pods), from the real time elapsed, the rate and each pod's share.
"""
