# shellcheck shell=bash
# shellcheck disable=SC2034  # used by the files that source this one
# Sourced by the shell tests that check what dpbench does when its standard output goes nowhere:
# commands to put before another that run it with its stdout on a pipe whose reader has already
# gone (no race with a reader that might still read; SIGPIPE at its default, as a shell leaves
# it), on /dev/full, or closed. Arrays, not functions, so that `timeout` can run them too.
into_closed_pipe=(python3 -c 'import os, subprocess, sys
r, w = os.pipe()
os.close(r)
sys.exit(subprocess.call(sys.argv[1:], stdout=w))')
onto_full_device=(bash -c 'exec "$@" >/dev/full' onto_full_device)
with_stdout_closed=(bash -c 'exec "$@" >&-' with_stdout_closed)
