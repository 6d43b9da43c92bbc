"""Check the NVML side against real device memory (for a GPU machine; needs torch and nvidia-ml-py).

One child process allocates memory with torch; the preflight must see it (process, cap), and after
the child is killed, the release wait must see the memory come back. Prints a JSON verdict; exit 1
when a check fails. Usage: python scripts/gpu_check.py [--gib 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vllm_fit.gpu import Devices

HOLDER = ("import sys, time, torch; x = torch.empty(int(float(sys.argv[1]) * (1 << 30)), dtype=torch.uint8, "
          "device='cuda:0'); torch.cuda.synchronize(); print('held', flush=True); time.sleep(600)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=8.0)
    args = parser.parse_args()
    env = dict(os.environ)
    before = Devices(env, 1)
    checks = {"nvml": before.preflight.available, "reason": before.preflight.reason}
    if not before.preflight.available:
        print(json.dumps(checks))
        return 1
    baseline = before.snapshot()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(args.gib)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    busy = Devices(env, 1).preflight
    seen = [p for p in busy.held_by_others if p.pid == holder.pid]
    checks["holder_seen"] = bool(seen)
    checks["holder_mib"] = (seen[0].used_bytes or 0) >> 20 if seen else None
    checks["cap_before"], checks["cap_busy"] = before.preflight.utilization_cap(), busy.utilization_cap()
    checks["cap_lowered"] = busy.utilization_cap() < before.preflight.utilization_cap()
    started = time.monotonic()
    holder.kill()
    holder.wait()
    waited = before.wait_released(baseline, timeout_s=60)
    checks["released"], checks["release_wait_s"] = waited["released"], round(time.monotonic() - started, 2)
    checks["devices"] = [d.name for d in busy.devices]
    ok = checks["holder_seen"] and checks["cap_lowered"] and checks["released"]
    print(json.dumps(checks, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
