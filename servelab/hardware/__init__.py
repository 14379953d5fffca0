"""Hardware facts the planner needs: the GPU catalog (`gpus.py`, data in `gpus.json`) and this machine's CPU
as a device (`cpu.py` description, `bandwidth.py` measured bandwidth, `host.py` the two as a device)."""

from servelab.hardware.gpus import GPU, INTERCONNECTS, find_gpu, gpu_names, load_gpus, with_overrides

__all__ = ["GPU", "INTERCONNECTS", "find_gpu", "gpu_names", "load_gpus", "with_overrides"]
