"""How much does `import circuitbook` add beyond importing torch and transformer_lens?

Each measurement runs in a fresh interpreter, so nothing is cached between them; the
script prints the median of several runs of each and the difference.
Target (issue: foundation): under one second.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

SNIPPETS = {
    "torch + transformer_lens": "import torch, transformer_lens",
    "torch + transformer_lens + circuitbook": "import torch, transformer_lens, circuitbook",
    "... + circuitbook.models": "import torch, transformer_lens, circuitbook, circuitbook.models",
}


def time_import(code: str, repeats: int) -> float:
    prog = f"import time, warnings; warnings.simplefilter('ignore'); t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True).stdout)
            for _ in range(repeats)]
    return statistics.median(runs)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    subprocess.run([sys.executable, "-c", "import torch, transformer_lens, circuitbook"], check=True)  # warm disk cache
    results = {name: time_import(code, repeats) for name, code in SNIPPETS.items()}
    base = results["torch + transformer_lens"]
    print(f"median of {repeats} fresh interpreters each")
    for name, secs in results.items():
        print(f"  {name:<42} {secs:6.2f} s   (+{secs - base:5.2f} s over torch + transformer_lens)")


if __name__ == "__main__":
    main()
