"""llama.cpp (llama-server) knowledge: build, launch flags, endpoints, allocation rules, log lines."""
