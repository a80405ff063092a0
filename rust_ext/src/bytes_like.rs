//! Arguments that take "a bytes-like object", as pymongo's decoders do: `bytes` is borrowed as is,
//! any other C-contiguous byte buffer (`bytearray`, `memoryview`, `mmap`, ...) is copied first, so
//! Python code running mid-call cannot change the bytes under the parser.

use std::borrow::Cow;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The bytes of `obj`; `TypeError` for objects without a byte buffer.
pub(crate) fn bytes_like<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    Ok(Cow::Owned(PyBuffer::<u8>::get(obj)?.to_vec(obj.py())?))
}
