#!/usr/bin/env bash
# One short GPU check on an NVIDIA machine (under five minutes): servelab doctor (JSON and table), the FP16
# matmul burn, NVML power sampling during a bandwidth-bound load and during the burn, the bound verdict from
# those two measurements, and a recorded doctor fixture of this machine (for tests/fixtures/doctor/).
# Works from a bare checkout: installs servelab first if it is not importable. Prints everything.
#   usage: benchmarks/gpu_check.sh [BURN_SECONDS]        (default 20; output fixture goes under $OUT or /tmp)
set -u
cd "$(dirname "$0")/.." || exit 1
BURN_SECONDS="${1:-20}"
OUT_DIR="${OUT:-/tmp}/servelab-gpu-check"
PY="${PYTHON:-python3}"
START=$(date +%s)
mkdir -p "$OUT_DIR"

section() { printf '\n==================== %s ====================\n' "$1"; }
run() { local limit=$1; shift; timeout "$limit" "$@"; local rc=$?; [ $rc -ne 0 ] && echo "[exit $rc: $*]"; return 0; }

section "machine"
date -u
run 20 nvidia-smi -L || true
run 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv
command -v nvidia-smi >/dev/null || echo "nvidia-smi: not found (no NVIDIA driver?)"

section "install"
if "$PY" -c "import servelab.cli.app" 2>/dev/null; then
    echo "servelab already importable: $("$PY" -c 'import servelab; print(servelab.__file__)')"
else
    run 180 "$PY" -m pip install -q --retries 1 --timeout 15 -e . \
        || run 60 "$PY" -m pip install -q --no-deps --no-build-isolation -e .
    "$PY" -c "import servelab.cli.app" 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
SERVELAB=("$PY" -m servelab.cli.app)
if ! "${SERVELAB[@]}" --version; then echo "servelab cannot run here (dependencies missing?): stopping"; exit 1; fi
if "$PY" -c "import torch, sys; print('torch', torch.__version__, 'CUDA available:', torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    HAVE_TORCH=1
else
    HAVE_TORCH=0
    echo "torch with CUDA: absent — the burn and the bandwidth load are skipped (pip install torch to enable)"
    "$PY" -c "import cupy; print('cupy', cupy.__version__, '(the burn can use it)')" 2>/dev/null || true
fi

section "servelab doctor --json"
run 90 "${SERVELAB[@]}" doctor --json | tee "$OUT_DIR/doctor.json"

section "servelab doctor (table)"
COLUMNS=160 run 90 "${SERVELAB[@]}" doctor

section "servelab doctor --burn ${BURN_SECONDS}s --p2p-test --json"
run $((BURN_SECONDS + 120)) "${SERVELAB[@]}" doctor --burn --burn-seconds "$BURN_SECONDS" --p2p-test --json \
    | tee "$OUT_DIR/doctor-burn.json"

section "power sampling: bandwidth-bound copy load, then compute-bound burn; the bound verdict"
if [ "$HAVE_TORCH" = 1 ]; then
run 150 "$PY" - "$BURN_SECONDS" <<'PYEOF'
import sys, time
import torch
from servelab.diagnose.bound import analyse_bound
from servelab.diagnose.burn import run_burn
from servelab.diagnose.gpus import read_gpu
from servelab.diagnose.power import PowerSampler, summarize
from servelab.diagnose.probe import RealProbe

seconds = min(float(sys.argv[1]), 15.0)
with RealProbe() as probe:
    gpu = read_gpu(probe, 0)
    print(f"GPU0: {gpu.name}, catalog bandwidth {gpu.bandwidth_gb_s} GB/s, power limit {gpu.power_limit_w} W")
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")  # 1 GiB, copied device-to-device
    dst = torch.empty_like(src)
    dst.copy_(src); torch.cuda.synchronize()
    sampler = PowerSampler(probe, hz=10, gpus=[0]); sampler.start()
    copies, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(8):
            dst.copy_(src)
        torch.cuda.synchronize(); copies += 8
    elapsed = time.perf_counter() - start
    copy_rows = sampler.stop()
    moved_bytes = 2 * src.numel()  # each copy reads and writes the buffer
    print(f"copy load: {copies} copies of 1 GiB in {elapsed:.1f} s = {moved_bytes * copies / elapsed / 1e9:.0f} GB/s")
    print("copy load power summary:", summarize(copy_rows))
    del src, dst; torch.cuda.empty_cache()
    burn = run_burn(probe, seconds=seconds, hz=10)
    print(f"burn: {burn.status} {burn.reason} backend={burn.backend} {burn.tflops and round(burn.tflops, 1)} TFLOPS, "
          f"settled power {burn.power_w} W, peak {burn.max_power_w} W, limit {burn.power_limit_w} W, "
          f"PCIe under load gen{burn.pcie_gen_under_load} x{burn.pcie_width_under_load}, {burn.samples} samples")
    verdict = analyse_bound(copy_rows, burn_power_w=burn.power_w, bytes_per_token=moved_bytes,
                            tok_s=copies / elapsed, bandwidth_gb_s=gpu.bandwidth_gb_s)
    print(f"bound analysis of the copy load (one 'token' = one 1 GiB copy): {verdict.verdict}")
    print(f"  {verdict.why}")
PYEOF
else
    echo "skipped: torch with CUDA is not installed"
fi

section "recorded doctor fixture of this machine"
run 90 "$PY" - "$OUT_DIR/fixture" <<'PYEOF'
import sys
from pathlib import Path
from servelab.diagnose.doctor import run_doctor
from servelab.diagnose.probe import RealProbe, RecordingProbe

with RealProbe() as real:
    recording = RecordingProbe(real)
    report = run_doctor(recording)
    out = recording.save(sys.argv[1])
print(f"{len(report.gpus)} GPU(s), {len(report.pairs)} pair(s), {len(report.findings)} finding(s); fixture in {out}")
for path in sorted(Path(out).iterdir()):
    print(f"--- {path.name}"); print(path.read_text()[:4000])
PYEOF

section "done"
echo "gpu_check.sh finished in $(( $(date +%s) - START )) s; outputs in $OUT_DIR"
