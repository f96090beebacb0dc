# shellcheck shell=bash
# shellcheck disable=SC2034  # work and pids are the sourcing test's
# Sourced by the shell tests that start dpbench processes in the background: a work folder ($work)
# and a list of the processes started ($pids); on exit, however the test ends, each of them is
# killed and the folder removed, so no rank outlives its test.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
