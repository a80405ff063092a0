//! `bson_decode` / `bson_decode_all`: drop-in equivalents of pymongo's `bson.decode` / `bson.decode_all`
//! (default `CodecOptions`) that parse bytes straight into Python objects.
//!
//! `decode` does the parsing, `keys` caches field names, `types` builds pymongo's value classes.
//! Malformed input raises `BsonDecodeError` (a `ValueError`) naming the byte offset.

mod decode;
mod fast;
mod keys;
mod types;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::bytes_like::bytes_like;
use decode::{DecodeError, Decoder};
use types::BsonTypes;

pyo3::create_exception!(
    polyperf._native,
    BsonDecodeError,
    PyValueError,
    "Malformed BSON: the message names the byte offset, also given as the `offset` attribute."
);

fn to_pyerr(py: Python<'_>, err: DecodeError) -> PyErr {
    let message = match &err.cause {
        Some(cause) => format!("{} at byte offset {}: {cause}", err.reason, err.offset),
        None => format!("{} at byte offset {}", err.reason, err.offset),
    };
    let py_err = BsonDecodeError::new_err(message);
    // Best effort: the message already carries the offset.
    let _ = py_err.value(py).setattr("offset", err.offset);
    if let Some(cause) = err.cause {
        py_err.set_cause(py, Some(cause));
    }
    py_err
}

/// Decode one BSON document (the whole of `data`) into a dict, exactly as pymongo's `bson.decode`.
#[pyfunction]
fn bson_decode<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let types = BsonTypes::get(py)?;
    let data = bytes_like(data)?;
    Decoder::new(py, &data, types)
        .decode_one()
        .map_err(|e| to_pyerr(py, e))
}

// bson_decode's three steps, ending in decode_all instead of decode_one: too small to fold.
/// Decode concatenated BSON documents into a list of dicts, exactly as pymongo's `bson.decode_all`.
#[pyfunction]
fn bson_decode_all<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let types = BsonTypes::get(py)?;
    let data = bytes_like(data)?;
    Decoder::new(py, &data, types)
        .decode_all()
        .map_err(|e| to_pyerr(py, e))
}

/// Which pymongo classes the decoder builds without calling their Python constructors (for tests:
/// each was verified at first use to build objects identical to the constructor's).
#[pyfunction]
fn _bson_fast_paths(py: Python<'_>) -> PyResult<Vec<(&'static str, bool)>> {
    Ok(BsonTypes::get(py)?.fast_paths().to_vec())
}

/// Adds `bson_decode`, `bson_decode_all`, `BsonDecodeError` and `BSON_MAX_DEPTH`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bson_decode, m)?)?;
    m.add_function(wrap_pyfunction!(bson_decode_all, m)?)?;
    m.add_function(wrap_pyfunction!(_bson_fast_paths, m)?)?;
    m.add("BsonDecodeError", m.py().get_type::<BsonDecodeError>())?;
    m.add("BSON_MAX_DEPTH", decode::MAX_DEPTH)?;
    Ok(())
}
