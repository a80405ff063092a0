//! BSON bytes straight into Python objects: no intermediate tree, dicts filled as elements are read.
//!
//! Acceptance follows pymongo's C decoder (`_cbsonmodule.c`) with the default `CodecOptions`: every
//! length is checked against the enclosing document, strings must be NUL-terminated and valid UTF-8
//! (embedded NULs allowed), array keys are skipped unread, booleans are 0 or 1, datetimes must fit
//! Python's `datetime`, and sub-documents holding `$ref` and `$id` become `DBRef`s. Where pymongo
//! parses an array element against a looser bound it still rejects the overrun afterwards, so checking
//! against the array's own end accepts exactly the same inputs. Nesting is capped at [`MAX_DEPTH`]
//! (pymongo is capped by Python's recursion limit, ~1,000 frames), so the native stack stays small.

// Fills dicts and lists and makes floats/ints via CPython's C API directly, for speed.
#![allow(unsafe_code)]

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use super::keys::KeyCache;
use super::types::{self, BsonTypes};

mod values;

/// Documents and arrays nested deeper than this are rejected.
pub(crate) const MAX_DEPTH: usize = 512;

/// A decoding failure at a byte offset of the input, with the Python error behind it if any.
pub(super) struct DecodeError {
    pub(super) offset: usize,
    pub(super) reason: Cow<'static, str>,
    pub(super) cause: Option<PyErr>,
}

fn fail<T>(offset: usize, reason: impl Into<Cow<'static, str>>) -> Result<T, DecodeError> {
    Err(DecodeError {
        offset,
        reason: reason.into(),
        cause: None,
    })
}

type Decoded<'py> = Result<Bound<'py, PyAny>, DecodeError>;

pub(super) struct Decoder<'py, 'a> {
    py: Python<'py>,
    data: &'a [u8],
    types: &'static BsonTypes,
    keys: KeyCache<'py>,
    /// Items of the arrays being built, innermost last (one allocation shared by every array).
    pending: Vec<Bound<'py, PyAny>>,
    depth: usize,
}

impl<'py, 'a> Decoder<'py, 'a> {
    pub(super) fn new(py: Python<'py>, data: &'a [u8], types: &'static BsonTypes) -> Self {
        Self {
            py,
            data,
            types,
            keys: KeyCache::new(py),
            pending: Vec::new(),
            depth: 0,
        }
    }

    /// The whole input as exactly one document (pymongo's `decode`).
    pub(super) fn decode_one(&mut self) -> Decoded<'py> {
        let size = self.top_level_size(0)?;
        if size != self.data.len() {
            return fail(
                size,
                format!(
                    "{} bytes of trailing data after the document",
                    self.data.len() - size
                ),
            );
        }
        Ok(self.document(0, size)?.0)
    }

    /// The input as concatenated documents (pymongo's `decode_all`): a list, empty for no bytes.
    pub(super) fn decode_all(&mut self) -> Decoded<'py> {
        let mut start = 0;
        while start < self.data.len() {
            let size = self.top_level_size(start)?;
            let (doc, _) = self.document(start, size)?;
            self.pending.push(doc);
            start += size;
        }
        self.take_list(0, 0)
    }

    /// Validates the length prefix and terminator of the top-level document at `start`.
    fn top_level_size(&self, start: usize) -> Result<usize, DecodeError> {
        let available = self.data.len() - start;
        if available < 5 {
            return fail(
                start,
                format!("{available} bytes is not enough for a BSON document"),
            );
        }
        let size = self.i32_at(start) as i64;
        if size < 5 {
            return fail(start, format!("document length {size} is less than 5"));
        }
        let size = size as usize;
        if size > available {
            return fail(
                start,
                format!("document length {size} exceeds the {available} bytes left"),
            );
        }
        if self.data[start + size - 1] != 0 {
            return fail(start + size - 1, "document is not terminated by a NUL byte");
        }
        Ok(size)
    }

    #[inline]
    fn u32_at(&self, pos: usize) -> u32 {
        // Callers check `pos + 4 <= end <= data.len()` first; out of range reads as 0 rather than panic.
        self.data
            .get(pos..pos + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    fn i32_at(&self, pos: usize) -> i32 {
        self.u32_at(pos) as i32
    }

    #[inline]
    fn u64_at(&self, pos: usize) -> u64 {
        self.data.get(pos..pos + 8).map_or(0, |b| {
            let mut word = [0u8; 8];
            word.copy_from_slice(b);
            u64::from_le_bytes(word)
        })
    }

    fn enter(&mut self, offset: usize) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return fail(
                offset,
                format!("documents nested deeper than {MAX_DEPTH} levels"),
            );
        }
        Ok(())
    }

    /// The document whose length prefix is at `start` and whose `size` bytes (terminator included)
    /// were checked to lie inside the input. Also says whether it has both `$ref` and `$id` keys.
    fn document(
        &mut self,
        start: usize,
        size: usize,
    ) -> Result<(Bound<'py, PyAny>, bool), DecodeError> {
        self.enter(start)?;
        // SAFETY: PyDict_New returns a new reference or NULL with an exception set.
        let dict = unsafe { Bound::from_owned_ptr_or_err(self.py, ffi::PyDict_New()) }
            .map_err(|e| py_fail(start, e))?;
        let end = start + size - 1;
        let mut pos = start + 4;
        let mut dbref_keys = 0u8;
        while pos < end {
            let tag = self.data[pos];
            let key_start = pos + 1;
            let Some(key_len) = self.data[key_start..end].iter().position(|&b| b == 0) else {
                return fail(key_start, "field name runs past the end of its document");
            };
            let key_bytes = &self.data[key_start..key_start + key_len];
            if key_bytes.first() == Some(&b'$') {
                dbref_keys |= match key_bytes {
                    b"$ref" => 1,
                    b"$id" => 2,
                    _ => 0,
                };
            }
            let Some(key) = self.keys.get(key_bytes) else {
                return fail(key_start, "field name is not valid UTF-8");
            };
            pos = key_start + key_len + 1;
            let value = self.value(tag, &mut pos, end, Some(&key))?;
            // SAFETY: all three are live; PyDict_SetItem takes its own references.
            if unsafe { ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) } < 0 {
                return Err(py_fail(key_start, PyErr::fetch(self.py)));
            }
        }
        self.depth -= 1;
        Ok((dict, dbref_keys == 3))
    }

    /// The array whose length prefix is at `start` (checked like a document's).
    fn array(&mut self, start: usize, size: usize) -> Decoded<'py> {
        self.enter(start)?;
        let end = start + size - 1;
        let mut pos = start + 4;
        let first = self.pending.len();
        while pos < end {
            let tag = self.data[pos];
            // pymongo skips array keys without reading them: neither "0", "1", ... nor UTF-8 is required.
            let Some(key_len) = self.data[pos + 1..end].iter().position(|&b| b == 0) else {
                return fail(pos + 1, "array key runs past the end of its array");
            };
            pos += key_len + 2;
            let value = self.value(tag, &mut pos, end, None)?;
            self.pending.push(value);
        }
        self.depth -= 1;
        self.take_list(first, start)
    }

    /// Moves `pending[first..]` into a new list.
    fn take_list(&mut self, first: usize, offset: usize) -> Decoded<'py> {
        let items = self.pending.len() - first;
        // SAFETY: PyList_New(n) makes a list of n NULL slots, each filled exactly once with a reference
        // it steals; a NULL list (out of memory) leaves the items to be dropped with `pending`.
        unsafe {
            let list =
                Bound::from_owned_ptr_or_err(self.py, ffi::PyList_New(items as ffi::Py_ssize_t))
                    .map_err(|e| py_fail(offset, e))?;
            for (i, item) in self.pending.drain(first..).enumerate() {
                ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr());
            }
            Ok(list)
        }
    }

    /// The value of type `tag` at `*pos`, which must end by `end` (its container's terminator);
    /// advances `*pos` past it.
    fn value(
        &mut self,
        tag: u8,
        pos: &mut usize,
        end: usize,
        key: Option<&Bound<'py, PyAny>>,
    ) -> Decoded<'py> {
        let at = *pos;
        let available = end - at;
        let need = |n: usize| {
            if available < n {
                fail(at, format!("{n}-byte value runs past its document"))
            } else {
                Ok(())
            }
        };
        let py = self.py;
        let value = match tag {
            0x01 => {
                need(8)?;
                *pos += 8;
                // SAFETY: returns a new reference or NULL with an exception set.
                unsafe {
                    Bound::from_owned_ptr_or_err(
                        py,
                        ffi::PyFloat_FromDouble(f64::from_bits(self.u64_at(at))),
                    )
                }
            }
            0x02 | 0x0E => return self.string(pos, end),
            0x03 => {
                let size = self.sub_document_size(at, end)?;
                let (doc, maybe_dbref) = self.document(at, size)?;
                *pos += size;
                if maybe_dbref {
                    self.dbref_hook(doc)
                } else {
                    Ok(doc)
                }
            }
            0x04 => {
                let size = self.sub_document_size(at, end)?;
                let list = self.array(at, size)?;
                *pos += size;
                Ok(list)
            }
            0x05 => return self.binary(pos, end),
            0x06 | 0x0A => Ok(py.None().into_bound(py)),
            0x07 => {
                need(12)?;
                *pos += 12;
                self.types.object_id(py, &self.data[at..at + 12])
            }
            0x08 => {
                need(1)?;
                *pos += 1;
                match self.data[at] {
                    0 => Ok(PyBool::new(py, false).to_owned().into_any()),
                    1 => Ok(PyBool::new(py, true).to_owned().into_any()),
                    other => return fail(at, format!("invalid boolean value {other:#04x}")),
                }
            }
            0x09 => {
                need(8)?;
                *pos += 8;
                let millis = self.u64_at(at) as i64;
                match types::datetime(py, millis) {
                    Some(value) => value,
                    None => {
                        return fail(
                            at,
                            format!("datetime {millis} ms is outside datetime's years 1-9999"),
                        )
                    }
                }
            }
            0x0B => return self.regex(pos, end),
            0x0C => {
                let collection = self.string(pos, end)?;
                if end - *pos < 12 {
                    return fail(*pos, "DBPointer id runs past its document");
                }
                let oid = self
                    .types
                    .object_id(py, &self.data[*pos..*pos + 12])
                    .map_err(|e| py_fail(at, e))?;
                *pos += 12;
                self.types.dbref(py, &[&collection, &oid])
            }
            0x0D => {
                let code = self.string(pos, end)?;
                self.types.code(py, &code, None)
            }
            0x0F => return self.code_with_scope(pos, end),
            0x10 => {
                need(4)?;
                *pos += 4;
                // SAFETY: returns a new reference or NULL with an exception set.
                unsafe {
                    Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLong(self.i32_at(at).into()))
                }
            }
            0x11 => {
                need(8)?;
                *pos += 8;
                self.types
                    .timestamp(py, self.u32_at(at + 4), self.u32_at(at))
            }
            0x12 => {
                need(8)?;
                *pos += 8;
                self.types.int64(py, self.u64_at(at) as i64)
            }
            0x13 => {
                need(16)?;
                *pos += 16;
                let mut bid = [0u8; 16];
                bid.copy_from_slice(&self.data[at..at + 16]);
                self.types.decimal128(py, &bid)
            }
            0xFF => self.types.min_key(py),
            0x7F => self.types.max_key(py),
            other => {
                let field = match key {
                    Some(key) => format!(
                        "field {:?}",
                        key.str().map(|s| s.to_string()).unwrap_or_default()
                    ),
                    None => "an array element".to_owned(),
                };
                return fail(at, format!("unknown BSON type {other:#04x} for {field}"));
            }
        };
        value.map_err(|e| py_fail(at, e))
    }
}

fn py_fail(offset: usize, err: PyErr) -> DecodeError {
    DecodeError {
        offset,
        reason: "could not build the value".into(),
        cause: Some(err),
    }
}
