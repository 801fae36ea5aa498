"""Check tokometer's NVML reader on a machine with NVIDIA GPUs (CI has none: its tests use a stand-in).

Prints one `GpuSample` per GPU as JSON, then reads again after ``--seconds`` (default 1) and prints
each GPU's energy-counter delta, mean power over that time, and the same energy from the power
integral, so that the counter's units (mJ -> J) can be judged against the power draw. Also times
one reading with and without PCIe throughput (the driver samples that for ~20 ms per direction).

    python bench/gpu_check.py [--seconds 1] [--busy]

``--busy`` keeps GPU 0 working meanwhile (needs torch with CUDA; skipped without it), so that power
and utilisation are not idle values. Exit status 0 when every GPU answered and the energy delta and
the power integral agree within 25 % (or the counter is unsupported), else 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time

from tokometer.observe.gpu_nvml import NvmlReader, available
from tokometer.observe.gpu_window import summarize_gpus
from tokometer.observe.snapshot import GpuSample


def _busy(stop: threading.Event) -> str:
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]  # installed only where a GPU is
    except ImportError:
        return "torch not installed: GPU left idle"
    if not torch.cuda.is_available():
        return "torch has no CUDA: GPU left idle"
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)

    def work() -> None:
        while not stop.is_set():
            for _ in range(20):
                _ = a @ a
            torch.cuda.synchronize()

    threading.Thread(target=work, daemon=True).start()
    return "GPU 0 busy with 8192x8192 fp16 matmuls"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--busy", action="store_true")
    args = parser.parse_args()
    if not available():
        print(json.dumps({"available": False}))
        return 1
    ok = True
    stop = threading.Event()
    with NvmlReader() as reader:
        count = reader.count
        started = time.perf_counter()
        reader.sample()
        with_pcie_s = time.perf_counter() - started
        no_pcie = NvmlReader(pcie_throughput=False)
        started = time.perf_counter()
        no_pcie.sample()
        without_pcie_s = time.perf_counter() - started
        no_pcie.close()
        note = _busy(stop) if args.busy else "GPU left as it is"
        if args.busy:
            time.sleep(1.0)  # let the clocks and power settle
        samples: list[GpuSample] = []
        readings = max(2, int(args.seconds / 0.1) + 1)
        for i in range(readings):  # every 100 ms, for the power integral
            samples.extend(reader.sample())
            if i < readings - 1:
                time.sleep(args.seconds / (readings - 1))
        stop.set()
    for sample in samples[:count]:  # the first reading of each GPU
        print(json.dumps({"sample": dataclasses.asdict(sample)}))
    by_counter = summarize_gpus(samples)
    by_power = summarize_gpus([dataclasses.replace(s, energy_j=None) for s in samples])
    for counter, power in zip(by_counter.gpus, by_power.gpus, strict=True):
        agree = None
        if counter.energy_from == "counter" and power.energy_j:
            agree = abs((counter.energy_j or 0) - power.energy_j) / power.energy_j <= 0.25
            ok = ok and agree
        print(json.dumps({"gpu": counter.index, "name": counter.name, "seconds": args.seconds,
                          "energy_delta_j": counter.energy_j, "energy_from": counter.energy_from,
                          "power_integral_j": power.energy_j, "power_mean_w": counter.power_mean_w,
                          "utilization_mean": counter.utilization_mean, "throttle_share": counter.throttle_share,
                          "agree_within_25_percent": agree, "findings": counter.findings()}))
    print(json.dumps({"read_all_gpus_s": with_pcie_s, "read_all_gpus_without_pcie_s": without_pcie_s,
                      "load": note, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
