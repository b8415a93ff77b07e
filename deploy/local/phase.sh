#!/usr/bin/env bash
# phase.sh NAME COMMAND...: runs COMMAND and appends "NAME SECONDS" to
# $SECKILL_PHASES (make test prints them at its end); the command's exit
# status is phase.sh's.
#   phase.sh --print   prints the phases recorded so far, and the time
#                      since $SECKILL_PHASES.start (phases may run side
#                      by side: their sum is more)
set -uo pipefail
file=${SECKILL_PHASES:?SECKILL_PHASES must name the file of phases}
if [ "${1:-}" = --print ]; then
  wall=0
  [ -s "$file.start" ] && wall=$(($(date +%s) - $(cat "$file.start")))
  awk -v wall="$wall" '{ printf "  %-60s %4d min %02d s\n", substr($0, 1, length($0) - length($NF) - 1), $NF / 60, $NF % 60 }
       END { printf "  %-60s %4d min %02d s\n", "from the start to here", wall / 60, wall % 60 }' "$file"
  exit 0
fi
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
echo "$name $(($(date +%s) - start))" >> "$file"
exit $rc
