"""``python -m bench [NAME ...] [--small]``: run the benchmarks and print one table."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

import bench


def discover() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="bench_* modules to run (default: all)")
    parser.add_argument("--small", action="store_true", help="the CI-sized run")
    args = parser.parse_args()
    names = args.names or discover()
    rows, failed = [], 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        started = time.monotonic()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        for figure in module.run(small=args.small):
            rows.append((name, figure))
            failed += figure.ok is False
        print(f"  done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    print(format_table(rows))
    return 1 if failed and not args.small else 0


def format_table(rows) -> str:
    header = ("benchmark", "figure", "value", "target", "ok", "ratio to baseline")
    lines = [header]
    for name, f in rows:
        ratio = f"{f.ratio:.2f} × {f.baseline}" if f.ratio is not None else ""
        ok = {True: "yes", False: "NO", None: ""}[f.ok]
        lines.append((name, f.name, f"{f.value:,.2f} {f.unit}", f.target, ok, ratio))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        out.append("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
