"""Speculative decoding: acceptance from logs, metrics or numbers; the speedup theory predicts; a verdict."""
