#!/bin/sh
# Kill program for the resource differential tests: appends its arguments
# to the file named by the first one.
out=$1
shift
echo "$@" >>"$out"
