#!/bin/sh
# Regenerates the golden strace captures that tests/test_syscall_audit.py parses.
# Usage: sh tests/testdata/strace/capture.sh PYTHON   (a Python with polyperf installed)
set -eu
PY=${1:?usage: capture.sh PYTHON}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=/tmp/polyperf-strace-golden
rm -rf "$WORK" && mkdir -p "$WORK"
"$PY" -c "from polyperf.data.geojson import write_geojson; write_geojson('$WORK/fc.json', 200)"
NATIVE=$("$PY" -c "import polyperf._native as n; print(n.__file__)")
TRACE="-f -y -s 0 -e trace=read,write,pread64,pwrite64,readv,writev"

# Two threads (so -f interleaves <unfinished ...>/resumed> lines): 40 unbuffered 3-byte writes
# beside an unbuffered parse of a 200-byte GeoJSON file; then readv/writev/pread64 and an EAGAIN.
# -S and loading the extension by path keep Python's start-up reads few.
# shellcheck disable=SC2086
strace $TRACE -o "$HERE/threads.txt" "$PY" -S -c "
import importlib.util, os, threading
spec = importlib.util.spec_from_file_location('polyperf._native', '$NATIVE')
native = importlib.util.module_from_spec(spec); spec.loader.exec_module(native)
writer = threading.Thread(target=native.write_lines, args=('$WORK/out.txt', 40, 3, 'unbuffered'))
writer.start()
native.parse_json_file('$WORK/fc.json', 'unbuffered')
writer.join()
fd = os.open('$WORK/vec.txt', os.O_RDWR | os.O_CREAT | os.O_TRUNC)
os.writev(fd, [b'abc', b'defgh'])
os.pread(fd, 4, 2)
os.lseek(fd, 0, os.SEEK_SET)
os.readv(fd, [bytearray(2), bytearray(16)])
os.close(fd)
r, w = os.pipe(); os.set_blocking(r, False)
try:
    os.read(r, 1)
except BlockingIOError:
    pass
"

# Stack traces (-k) of a classic unbuffered copy: dd with 1-byte blocks, two processes under -f.
# shellcheck disable=SC2086
strace $TRACE -k -o "$HERE/stack.txt" sh -c "
dd if=$WORK/fc.json of=$WORK/copy1 bs=1 count=48 status=none &
dd if=$WORK/fc.json of=$WORK/copy2 bs=64 status=none
wait"
rm -rf "$WORK"
