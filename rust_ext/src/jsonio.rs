//! The I/O paths of era.co's "Unbuffered I/O can make your Rust programs much slower": JSON parsed
//! through an unbuffered `File`, a `BufReader`, or a whole-file read, and lines written through a bare
//! `File` or a `BufWriter`. Each call counts its own syscalls (see `syscalls`) and times itself, so
//! Python-side overhead never enters the figures.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

use crate::errors::ExtError;
use crate::geojson::{Checksum, FeatureCollection};
use crate::syscalls;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadMode {
    Unbuffered,
    Buffered,
    ReadAll,
}

impl FromStr for ReadMode {
    type Err = ExtError;
    fn from_str(mode: &str) -> Result<Self, ExtError> {
        match mode {
            "unbuffered" => Ok(Self::Unbuffered),
            "buffered" => Ok(Self::Buffered),
            "read_all" => Ok(Self::ReadAll),
            other => Err(ExtError::InvalidArgument(format!(
                "unknown read mode {other:?}: expected \"unbuffered\", \"buffered\" or \"read_all\""
            ))),
        }
    }
}

// The same FromStr shape as ReadMode: each enum names its own modes in its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteMode {
    Unbuffered,
    Buffered,
}

impl FromStr for WriteMode {
    type Err = ExtError;
    fn from_str(mode: &str) -> Result<Self, ExtError> {
        match mode {
            "unbuffered" => Ok(Self::Unbuffered),
            "buffered" => Ok(Self::Buffered),
            other => Err(ExtError::InvalidArgument(format!(
                "unknown write mode {other:?}: expected \"unbuffered\" or \"buffered\""
            ))),
        }
    }
}

pub(crate) fn check_capacity(capacity: usize) -> Result<usize, ExtError> {
    if capacity == 0 {
        return Err(ExtError::InvalidArgument(
            "capacity must be at least 1 byte".into(),
        ));
    }
    Ok(capacity)
}

pub(crate) struct ParseOutcome {
    pub(crate) bytes: u64,
    pub(crate) read_syscalls: u64,
    pub(crate) elapsed_ns: u64,
    pub(crate) checksum: Checksum,
}

pub(crate) struct WriteOutcome {
    pub(crate) bytes: u64,
    pub(crate) write_syscalls: u64,
    pub(crate) elapsed_ns: u64,
}

fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Opens `path` for reading; a directory is refused here because Linux lets `open(2)` succeed on
/// one and only the first `read` would fail, deep inside serde_json.
fn open_regular(path: &Path) -> Result<(File, u64), ExtError> {
    let file = File::open(path).map_err(|e| ExtError::io(path, e))?;
    let meta = file.metadata().map_err(|e| ExtError::io(path, e))?;
    if meta.is_dir() {
        return Err(ExtError::io(path, std::io::Error::from_raw_os_error(21))); // EISDIR
    }
    Ok((file, meta.len()))
}

fn parse_error(path: &Path, err: serde_json::Error) -> ExtError {
    if err.is_io() {
        return ExtError::io(path, std::io::Error::other(err.to_string()));
    }
    let what = if err.is_eof() {
        "truncated JSON"
    } else {
        "invalid GeoJSON FeatureCollection"
    };
    ExtError::InvalidInput(format!("{}: {what}: {err}", path.display()))
}

/// Parses the GeoJSON FeatureCollection at `path` through the given read path.
pub(crate) fn parse_file(
    path: &Path,
    mode: ReadMode,
    capacity: usize,
) -> Result<ParseOutcome, ExtError> {
    let capacity = check_capacity(capacity)?;
    let start = Instant::now();
    let counted = syscalls::measure(|| -> Result<(FeatureCollection, u64), ExtError> {
        let (file, len) = open_regular(path)?;
        let parsed = match mode {
            ReadMode::Unbuffered => serde_json::from_reader(file),
            ReadMode::Buffered => serde_json::from_reader(BufReader::with_capacity(capacity, file)),
            ReadMode::ReadAll => {
                let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
                let mut file = file;
                file.read_to_end(&mut bytes)
                    .map_err(|e| ExtError::io(path, e))?;
                serde_json::from_slice(&bytes)
            }
        };
        Ok((parsed.map_err(|e| parse_error(path, e))?, len))
    })
    .map_err(|e| ExtError::io("/proc/thread-self/io", e))??;
    let elapsed = elapsed_ns(start);
    let (collection, bytes) = counted.value;
    Ok(ParseOutcome {
        bytes,
        read_syscalls: counted.read_syscalls,
        elapsed_ns: elapsed,
        checksum: collection.checksum(),
    })
}

/// One deterministic line of `line_len` bytes, newline included.
fn line_bytes(line_len: usize) -> Vec<u8> {
    let mut line: Vec<u8> = (0..line_len).map(|i| b'a' + (i % 26) as u8).collect();
    if let Some(last) = line.last_mut() {
        *last = b'\n';
    }
    line
}

/// Writes `lines` lines of `line_len` bytes each to a new file at `path`, one `write_all` per line.
pub(crate) fn write_lines(
    path: &Path,
    lines: u64,
    line_len: usize,
    mode: WriteMode,
    capacity: usize,
) -> Result<WriteOutcome, ExtError> {
    let capacity = check_capacity(capacity)?;
    if line_len == 0 {
        return Err(ExtError::InvalidArgument(
            "line_len must be at least 1 byte".into(),
        ));
    }
    let line = line_bytes(line_len);
    let start = Instant::now();
    let counted = syscalls::measure(|| -> Result<(), ExtError> {
        let file = File::create(path).map_err(|e| ExtError::io(path, e))?;
        let io_err = |e| ExtError::io(path, e);
        match mode {
            WriteMode::Unbuffered => {
                let mut file = file;
                for _ in 0..lines {
                    file.write_all(&line).map_err(io_err)?;
                }
            }
            WriteMode::Buffered => {
                let mut writer = BufWriter::with_capacity(capacity, file);
                for _ in 0..lines {
                    writer.write_all(&line).map_err(io_err)?;
                }
                writer.flush().map_err(io_err)?;
            }
        }
        Ok(())
    })
    .map_err(|e| ExtError::io("/proc/thread-self/io", e))??;
    Ok(WriteOutcome {
        bytes: lines * line_len as u64,
        write_syscalls: counted.write_syscalls,
        elapsed_ns: elapsed_ns(start),
    })
}
