//! `polyperf._native`: module wiring only. Each function releases the GIL for its measured work and
//! returns a small frozen result object; errors become Python exceptions in `errors`.

mod alloc_count;
mod bson_paths;
mod bson_py;
mod bytes_like;
mod errors;
mod geojson;
mod jsonio;
mod syscalls;
mod test_slowdown;

use std::path::PathBuf;

use pyo3::prelude::*;

/// Outcome of one `parse_json_file` call.
#[pyclass(frozen, get_all, module = "polyperf._native")]
struct ParseResult {
    bytes: u64,
    read_syscalls: u64,
    elapsed_ns: u64,
    features: u64,
    positions: u64,
    coordinate_sum: f64,
    properties: u64,
    /// (features, positions, coordinate_sum, properties): equal across modes for one file.
    checksum: (u64, u64, f64, u64),
}

#[pymethods]
impl ParseResult {
    fn __repr__(&self) -> String {
        format!(
            "ParseResult(bytes={}, read_syscalls={}, elapsed_ns={}, features={}, positions={})",
            self.bytes, self.read_syscalls, self.elapsed_ns, self.features, self.positions
        )
    }
}

/// Outcome of one `write_lines` call.
#[pyclass(frozen, get_all, module = "polyperf._native")]
struct WriteResult {
    bytes: u64,
    write_syscalls: u64,
    elapsed_ns: u64,
}

#[pymethods]
impl WriteResult {
    fn __repr__(&self) -> String {
        format!(
            "WriteResult(bytes={}, write_syscalls={}, elapsed_ns={})",
            self.bytes, self.write_syscalls, self.elapsed_ns
        )
    }
}

/// Parse the GeoJSON FeatureCollection at `path` into typed Rust structs.
///
/// mode: "unbuffered" (serde_json::from_reader on a bare File), "buffered" (BufReader with
/// `capacity` bytes) or "read_all" (read the whole file, then from_slice). Syscalls are counted
/// for the calling thread only, and time is measured inside Rust, with the GIL released.
#[pyfunction]
#[pyo3(signature = (path, mode, capacity = 8192))]
fn parse_json_file(
    py: Python<'_>,
    path: PathBuf,
    mode: &str,
    capacity: usize,
) -> PyResult<ParseResult> {
    let mode: jsonio::ReadMode = mode.parse()?;
    // the test knob pads a share of the whole call: opening, reading, parsing and freeing the parsed collection
    let outcome = py.detach(|| {
        let start = std::time::Instant::now();
        let outcome = jsonio::parse_file(&path, mode, capacity);
        test_slowdown::pad(start.elapsed());
        outcome
    })?;
    let sum = outcome.checksum;
    Ok(ParseResult {
        bytes: outcome.bytes,
        read_syscalls: outcome.read_syscalls,
        elapsed_ns: outcome.elapsed_ns,
        features: sum.features,
        positions: sum.positions,
        coordinate_sum: sum.coordinate_sum,
        properties: sum.properties,
        checksum: (
            sum.features,
            sum.positions,
            sum.coordinate_sum,
            sum.properties,
        ),
    })
}

/// Write `lines` lines of `line_len` bytes (newline included) to `path`, one write per line.
///
/// mode: "unbuffered" (each line is a write syscall) or "buffered" (BufWriter with `capacity`).
#[pyfunction]
#[pyo3(signature = (path, lines, line_len, mode, capacity = 8192))]
fn write_lines(
    py: Python<'_>,
    path: PathBuf,
    lines: u64,
    line_len: usize,
    mode: &str,
    capacity: usize,
) -> PyResult<WriteResult> {
    let mode: jsonio::WriteMode = mode.parse()?;
    let outcome = py.detach(|| jsonio::write_lines(&path, lines, line_len, mode, capacity))?;
    Ok(WriteResult {
        bytes: outcome.bytes,
        write_syscalls: outcome.write_syscalls,
        elapsed_ns: outcome.elapsed_ns,
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    test_slowdown::init()?;
    m.add_class::<ParseResult>()?;
    m.add_class::<WriteResult>()?;
    m.add_function(wrap_pyfunction!(parse_json_file, m)?)?;
    m.add_function(wrap_pyfunction!(write_lines, m)?)?;
    bson_paths::register(m)?;
    bson_py::register(m)?;
    Ok(())
}
