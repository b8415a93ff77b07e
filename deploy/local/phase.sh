#!/usr/bin/env bash
# phase.sh NAME COMMAND...: runs COMMAND and appends "NAME SECONDS" to
# $SECKILL_PHASES (make test prints them at its end); the command's exit
# status is phase.sh's.
#   phase.sh --print   prints the phases recorded so far, and their sum
set -uo pipefail
file=${SECKILL_PHASES:?SECKILL_PHASES must name the file of phases}
if [ "${1:-}" = --print ]; then
  awk '{ t += $NF; printf "  %-60s %4d min %02d s\n", substr($0, 1, length($0) - length($NF) - 1), $NF / 60, $NF % 60 }
       END { printf "  %-60s %4d min %02d s\n", "all phases", t / 60, t % 60 }' "$file"
  exit 0
fi
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
echo "$name $(($(date +%s) - start))" >> "$file"
exit $rc
