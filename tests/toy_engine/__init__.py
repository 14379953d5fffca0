"""A toy engine that lives in the test suite: one package and one registry entry, no other file touched.

It claims any server that answers ``/sim/requests`` (servelab's reference server), is launched as
``toy-server MODEL --ctx N``, plans like a dense engine with an f16 KV cache, and knows one log line.
"""
