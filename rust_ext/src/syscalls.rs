//! Exact per-thread I/O syscall counters, read from `/proc/thread-self/io`.
//!
//! The kernel bumps `syscr`/`syscw` once per read-/write-family syscall of this thread, so a delta
//! taken around some work counts that work's syscalls exactly. Taking a snapshot costs one `read()`
//! itself (one `pread` of the counters file), which `measure` subtracts.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Read- and write-family syscalls issued so far by the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IoCounters {
    pub(crate) syscr: u64,
    pub(crate) syscw: u64,
}

/// Reads the counters with exactly one `pread` syscall (a larger buffer than the file ever needs, so
/// no second read is issued to find EOF).
fn snapshot(proc_io: &File) -> io::Result<IoCounters> {
    let mut buf = [0u8; 512];
    let n = proc_io.read_at(&mut buf, 0)?;
    parse(&buf[..n])
}

fn parse(text: &[u8]) -> io::Result<IoCounters> {
    let text =
        std::str::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let field = |name: &str| -> io::Result<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("no `{name}` in /proc/thread-self/io"),
                )
            })
    };
    Ok(IoCounters {
        syscr: field("syscr")?,
        syscw: field("syscw")?,
    })
}

/// The read/write syscalls `work` issued on this thread, excluding the measurement's own.
pub(crate) struct Counted<T> {
    pub(crate) value: T,
    pub(crate) read_syscalls: u64,
    pub(crate) write_syscalls: u64,
}

/// Runs `work` and counts its syscalls. The counters file is opened before the first snapshot so
/// that opening it is not counted; the first snapshot's own `pread` lands inside the window and is
/// subtracted (the kernel counts a read after it completes, so a snapshot never sees itself).
pub(crate) fn measure<T, E>(
    work: impl FnOnce() -> Result<T, E>,
) -> Result<Result<Counted<T>, E>, io::Error> {
    let proc_io = File::open("/proc/thread-self/io")?;
    let before = snapshot(&proc_io)?;
    let result = work();
    let after = snapshot(&proc_io)?;
    Ok(result.map(|value| Counted {
        value,
        read_syscalls: after.syscr.saturating_sub(before.syscr).saturating_sub(1),
        write_syscalls: after.syscw.saturating_sub(before.syscw),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counter_file() {
        let text = b"rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 0\n";
        assert_eq!(parse(text).ok(), Some(IoCounters { syscr: 3, syscw: 4 }));
    }

    #[test]
    fn empty_work_counts_nothing() -> io::Result<()> {
        let counted = measure(|| Ok::<_, io::Error>(()))??;
        assert_eq!((counted.read_syscalls, counted.write_syscalls), (0, 0));
        Ok(())
    }

    #[test]
    fn counts_each_read() -> io::Result<()> {
        let file = File::open("/proc/self/stat")?;
        let counted = measure(|| {
            let mut byte = [0u8; 1];
            for offset in 0..5 {
                file.read_at(&mut byte, offset)?;
            }
            Ok::<_, io::Error>(())
        })??;
        assert_eq!(counted.read_syscalls, 5);
        Ok(())
    }
}
