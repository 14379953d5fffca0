"""servelab sim: the reference server with known timing and faults that the bench and its tests run against
(an OpenAI-compatible server on loopback; not part of the client)."""
