#!/usr/bin/env python3
"""Holistic Trace Analysis beside dpbench's own breakdown.

Loads a folder written by `dpbench --trace_format=hta --trace_file=FOLDER` with HTA (PyPI's
HolisticTraceAnalysis), runs its temporal breakdown and communication/computation overlap, and
prints, per rank (device), HTA's fractions beside the same fractions from the result's
summary.breakdown. With --tolerance it exits 1 where a compared pair differs by more than that
many percentage points (README, "Holistic Trace Analysis", says which pairs and why the others
differ by definition).

Usage: python3 scripts/hta_breakdown.py FOLDER RESULT_JSON [--tolerance PP] [--ranks N]
"""
import argparse
import json
import logging
import math
import sys


def dpbench_fractions(result, device):
    """Percent of the wall time per step, as HTA splits it, from summary.breakdown's parts."""
    breakdown = result["summary"]["breakdown"]
    part = breakdown["per_device"][device]
    wall = breakdown["wall_ms_per_step"]
    computing = part["forward_ms"] + part["backward_ms"] + part["update_ms"]
    fractions = {
        "compute": 100 * computing / wall,
        "exposed_comm": 100 * part["exposed_comm_ms"] / wall,
        "data_wait": 100 * part["data_wait_ms"] / wall,
        "idle": 100 * (part["straggler_wait_ms"] + part["host_gap_ms"]) / wall,
    }
    # The communication stream's time the compute stream did not wait for.
    comm = result["summary"].get("comm", {})
    transfer = comm.get("transfer_ms_per_step", 0)
    if transfer > 0:
        fractions["overlap"] = 100 * max(0.0, 1 - part["exposed_comm_ms"] / transfer)
    return fractions


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("result")
    parser.add_argument("--tolerance", type=float, help="percentage points; exit 1 past them")
    parser.add_argument("--ranks", type=int, help="the ranks HTA must load (exit 1 otherwise)")
    args = parser.parse_args()

    logging.disable(logging.WARNING)  # HTA warns of what dpbench's traces lack by design (ProfilerStep)
    from hta.trace_analysis import TraceAnalysis

    with open(args.result) as f:
        result = json.load(f)
    analysis = TraceAnalysis(trace_dir=args.folder)
    ranks = analysis.t.get_ranks()
    failures = []
    if args.ranks is not None and ranks != list(range(args.ranks)):
        failures.append(f"HTA loaded ranks {ranks}, not 0..{args.ranks - 1}")
    temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    overlap = None
    if "overlap" in dpbench_fractions(result, 0):  # something was exchanged
        overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")

    print(f"{'rank':>4}  {'':<24}{'HTA %':>8}  {'dpbench %':>9}  dpbench's parts")
    for rank in ranks:
        ours = dpbench_fractions(result, rank)
        hta = temporal.loc[rank]
        rows = [
            ("compute", hta["compute_time_pctg"], ours["compute"], "forward + backward + update", True),
            ("non-compute", hta["non_compute_time_pctg"], ours["exposed_comm"], "exposed_comm",
             ours["data_wait"] == 0),  # host-fed data: copies are non-compute, building batches idle
            ("idle", hta["idle_time_pctg"], ours["idle"] + ours["data_wait"],
             "straggler_wait + host_gap + data_wait", False),
        ]
        if overlap is not None:
            rows.append(("comm/comp overlap", overlap.loc[rank]["comp_comm_overlap_pctg"], ours["overlap"],
                         "1 - exposed_comm / transfer", True))
        for name, theirs, mine, parts, compared in rows:
            mark = ""
            if compared and args.tolerance is not None:
                if math.isnan(theirs) or abs(theirs - mine) > args.tolerance:
                    failures.append(f"rank {rank} {name}: HTA {theirs:.2f}%, dpbench {mine:.2f}%")
                    mark = "  <- differs"
            print(f"{rank:>4}  {name:<24}{theirs:>8.2f}  {mine:>9.2f}  {parts}{mark}")
    if failures:
        print(f"HTA and dpbench differ by more than {args.tolerance} percentage points:", file=sys.stderr)
        for failure in failures:
            print("  " + failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
