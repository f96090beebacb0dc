# Condenses `cmake --build` output into a build's progress for people (scripts/build.sh): one
# line per tenth of the build (or one line rewritten in place on a terminal: -v tty=1), the
# compiler's own messages (errors, warnings) passed through as they come, and a last line that
# says what was done ("up to date" when nothing needed compiling).
# Input: cmake's Makefile-generator lines "[ 42%] Building CXX object ..." and the rest.
BEGIN { compiled = 0; shown = -1; on_line = 0 }

function say(text) {
  if (tty) { printf "\r\033[K%s", text; on_line = 1 }
  else print text
  fflush()
}

function end_line() {
  if (on_line) { printf "\n"; on_line = 0 }
}

/^\[ *[0-9]+%\] Building / {
  compiled++
  percent = $0
  sub(/^\[ */, "", percent)
  sub(/%\].*/, "", percent)
  target = $NF
  sub(/^.*CMakeFiles\/[^\/]*\.dir\//, "", target)
  sub(/\.o$/, "", target)
  if (tty) say(sprintf("build: %3d%%  compiling %s", percent, target))
  else if (int(percent / 10) > shown) {
    shown = int(percent / 10)
    say(sprintf("build: %3d%%  compiling %s", percent, target))
  }
  next
}

/^\[ *[0-9]+%\] (Built target|Linking|Generating|Scanning|Automatic MOC|dpbench version stamp)/ { next }
/^(Consolidate compiler generated dependencies|gmake(\[[0-9]+\])?: (Entering|Leaving) directory)/ { next }

# Anything else is the compiler or make speaking: an error or a warning the user must see.
{ end_line(); print; fflush() }

END {
  end_line()
  if (compiled == 0) print "build: up to date"
  else print "build: done, " compiled " file" (compiled == 1 ? "" : "s") " compiled"
}
