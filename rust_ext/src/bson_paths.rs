//! `deserialize_reply` and the BSON dataset generators: the `bson_paths` crate (shared with
//! `rust_apps/bson_server`) plus timing and allocation counts, with the GIL released.

use std::time::Instant;

use ::bson_paths::{Dataset, DeserializePath};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::alloc_count;
use crate::bytes_like::bytes_like;
use crate::errors::ExtError;

/// Outcome of one `deserialize_reply` call.
#[pyclass(frozen, get_all, module = "polyperf._native")]
pub(crate) struct DeserializeResult {
    /// The path's name ("clone", "document", "raw" or "raw_borrowed").
    path: &'static str,
    /// Bytes of the reply.
    bytes: u64,
    /// Documents in the reply's `firstBatch`.
    documents: u64,
    /// Equal across paths for the same bytes (see the `bson_paths` crate for its definition).
    checksum: u64,
    /// Wall time of the deserialization and of dropping its result, measured in Rust.
    elapsed_ns: u64,
    /// Rust heap allocations made by the call on its thread (exact, deterministic).
    allocations: u64,
    /// Bytes those allocations requested.
    allocated_bytes: u64,
}

#[pymethods]
impl DeserializeResult {
    fn __repr__(&self) -> String {
        format!(
            "DeserializeResult(path={:?}, bytes={}, documents={}, checksum={}, elapsed_ns={}, allocations={}, \
             allocated_bytes={})",
            self.path,
            self.bytes,
            self.documents,
            self.checksum,
            self.elapsed_ns,
            self.allocations,
            self.allocated_bytes
        )
    }
}

fn to_ext(err: ::bson_paths::Error) -> ExtError {
    match err {
        ::bson_paths::Error::UnknownPath(_) | ::bson_paths::Error::UnknownDataset(_) => {
            ExtError::InvalidArgument(err.to_string())
        }
        other => ExtError::InvalidInput(format!("invalid find reply: {other}")),
    }
}

/// Deserialize one find reply (`{cursor: {id, ns, firstBatch: [...]}, ok: 1}`) into typed Rust structs.
///
/// path: "clone" (`Document::from_reader`, clone, `from_document`), "document" (without the clone),
/// "raw" (`from_slice` into owned structs) or "raw_borrowed" (`from_slice` into structs borrowing
/// `&str`). Malformed bytes, a wrong shape or an unknown path raise `ValueError`.
#[pyfunction]
fn deserialize_reply(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    path: &str,
) -> PyResult<DeserializeResult> {
    let path: DeserializePath = path.parse().map_err(to_ext)?;
    let data = bytes_like(data)?;
    let data: &[u8] = &data;
    let (outcome, elapsed_ns, counted) = py.detach(|| {
        let start = Instant::now();
        let (outcome, counted) =
            alloc_count::measure(|| ::bson_paths::deserialize_reply(data, path));
        let elapsed_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        (outcome, elapsed_ns, counted)
    });
    let outcome = outcome.map_err(to_ext)?;
    Ok(DeserializeResult {
        path: path.name(),
        bytes: data.len() as u64,
        documents: outcome.documents as u64,
        checksum: outcome.checksum,
        elapsed_ns,
        allocations: counted.allocations,
        allocated_bytes: counted.allocated_bytes,
    })
}

/// `n` generated documents of `dataset` ("find", "flat", "nested" or "types") wrapped in one find reply.
#[pyfunction]
#[pyo3(signature = (n, dataset = "find"))]
fn bson_reply<'py>(py: Python<'py>, n: usize, dataset: &str) -> PyResult<Bound<'py, PyBytes>> {
    let dataset: Dataset = dataset.parse().map_err(to_ext)?;
    let bytes = py.detach(|| ::bson_paths::encode_dataset_reply(dataset, n));
    Ok(PyBytes::new(py, &bytes))
}

// bson_reply's steps with encode_dataset instead of encode_dataset_reply: too small to fold.
/// `n` generated documents of `dataset`, concatenated (input for `bson_decode_all`).
#[pyfunction]
#[pyo3(signature = (n, dataset = "find"))]
fn bson_documents<'py>(py: Python<'py>, n: usize, dataset: &str) -> PyResult<Bound<'py, PyBytes>> {
    let dataset: Dataset = dataset.parse().map_err(to_ext)?;
    let bytes = py.detach(|| ::bson_paths::encode_dataset(dataset, n));
    Ok(PyBytes::new(py, &bytes))
}

/// Adds this module's functions, class and the name tuples `DESERIALIZE_PATHS` and `BSON_DATASETS`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DeserializeResult>()?;
    m.add_function(wrap_pyfunction!(deserialize_reply, m)?)?;
    m.add_function(wrap_pyfunction!(bson_reply, m)?)?;
    m.add_function(wrap_pyfunction!(bson_documents, m)?)?;
    let paths: Vec<&str> = DeserializePath::ALL.iter().map(|p| p.name()).collect();
    m.add(
        "DESERIALIZE_PATHS",
        pyo3::types::PyTuple::new(m.py(), paths)?,
    )?;
    let datasets: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
    m.add(
        "BSON_DATASETS",
        pyo3::types::PyTuple::new(m.py(), datasets)?,
    )?;
    Ok(())
}
