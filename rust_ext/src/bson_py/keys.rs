//! Field-name strings, created once and reused: a direct-mapped cache of interned `str` objects keyed
//! by their bytes, shared by all calls.
//!
//! Documents repeat the same field names, so a hit replaces pymongo's per-field decode, allocation and
//! hash (a cached, interned `str` already carries its hash into `PyDict_SetItem`) by one byte
//! comparison. Only ASCII names up to `MAX_CACHED_LEN` bytes are cached: their UTF-8 bytes are the
//! `str`'s own 1-byte data, so the comparison needs no copy.
//!
//! The table outlives calls (a per-call table made decoding one small document 1.4-1.7x slower than
//! pymongo: every name was a miss, interned, then released). A call takes it with `try_lock` and keeps
//! it until it returns; the table holds at most `SLOTS` strings for the life of the process. Python
//! code run mid-call (a class's constructor) may let another thread decode meanwhile: that call finds
//! the table taken and uses a private one for itself, so no thread ever waits for it while holding
//! the GIL.

// The key cache holds raw `str` pointers and fills strings in place via CPython's C API, for speed.
#![allow(unsafe_code)]

use std::sync::{Mutex, MutexGuard};

use pyo3::ffi;
use pyo3::prelude::*;

const SLOTS: usize = 1024;
const MAX_CACHED_LEN: usize = 64;

/// Strong references to compact ASCII `str`s, or null. 1,024 slots keep collisions rare for documents
/// of ~100 distinct names (256 thrashed on the `flat` dataset).
struct Table(Vec<*mut ffi::PyObject>);

// SAFETY: the pointers are strong references to immutable `str`s; they are only dereferenced, and
// reference counts only changed, by a thread that holds the GIL and this table's lock.
unsafe impl Send for Table {}

impl Table {
    fn new() -> Self {
        Table(vec![std::ptr::null_mut(); SLOTS])
    }
}

static SHARED: Mutex<Option<Table>> = Mutex::new(None);

pub(super) struct KeyCache<'py> {
    py: Python<'py>,
    shared: Option<MutexGuard<'static, Option<Table>>>,
    /// Used when the shared table is taken; its strings are released when the call ends.
    private: Option<Table>,
}

impl<'py> KeyCache<'py> {
    pub(super) fn new(py: Python<'py>) -> Self {
        Self {
            py,
            shared: SHARED.try_lock().ok(),
            private: None,
        }
    }

    fn table(&mut self) -> &mut Table {
        match &mut self.shared {
            Some(guard) => guard.get_or_insert_with(Table::new),
            None => self.private.get_or_insert_with(Table::new),
        }
    }

    /// A new reference to the `str` for `bytes`, or `None` if they are not valid UTF-8.
    #[inline]
    pub(super) fn get(&mut self, bytes: &[u8]) -> Option<Bound<'py, PyAny>> {
        let py = self.py;
        if bytes.len() > MAX_CACHED_LEN || !bytes.is_ascii() {
            return decode_utf8(py, bytes);
        }
        let slot = self.table().0.get_mut(slot_index(bytes))?;
        if !slot.is_null() && ascii_bytes(*slot) == bytes {
            // SAFETY: the slot holds a live object; the new strong reference goes to the caller.
            return Some(unsafe { Bound::from_borrowed_ptr(py, *slot) });
        }
        let key = new_ascii(py, bytes)?;
        let old = std::mem::replace(slot, key.as_ptr());
        // SAFETY: the slot takes its own reference to the live `key`, and drops the one it held (the
        // GIL is held: the cache carries `'py`).
        unsafe {
            ffi::Py_INCREF(key.as_ptr());
            if !old.is_null() {
                ffi::Py_DECREF(old);
            }
        }
        Some(key)
    }
}

impl Drop for KeyCache<'_> {
    fn drop(&mut self) {
        for key in self
            .private
            .take()
            .into_iter()
            .flat_map(|t| t.0)
            .filter(|k| !k.is_null())
        {
            // SAFETY: each non-null slot owns one reference; the GIL is held.
            unsafe { ffi::Py_DECREF(key) };
        }
    }
}

/// The 1-byte data of a cached compact ASCII `str` (which equals its UTF-8 bytes).
#[inline]
fn ascii_bytes<'a>(key: *mut ffi::PyObject) -> &'a [u8] {
    // SAFETY: only strings made by `new_ascii` (compact, ASCII, kind 1) are cached, and the slot keeps
    // them alive while the returned slice is compared.
    unsafe {
        let len = ffi::PyUnicode_GET_LENGTH(key) as usize;
        std::slice::from_raw_parts(ffi::PyUnicode_DATA(key) as *const u8, len)
    }
}

/// A hash of the first and last (up to) 8 bytes and the length, mixed so that names differing only in
/// their last characters ("field_07", "field_08") spread over the table.
#[inline]
fn slot_index(bytes: &[u8]) -> usize {
    let mut head = [0u8; 8];
    let mut tail = [0u8; 8];
    let n = bytes.len().min(8);
    head[..n].copy_from_slice(&bytes[..n]);
    tail[..n].copy_from_slice(&bytes[bytes.len() - n..]);
    let mut h = u64::from_le_bytes(head).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from_le_bytes(tail)
            .rotate_left(32)
            .wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ bytes.len() as u64;
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> 32) as usize % SLOTS
}

/// An interned `str` from ASCII bytes (copied straight into a new 1-byte-kind string).
fn new_ascii<'py>(py: Python<'py>, bytes: &[u8]) -> Option<Bound<'py, PyAny>> {
    // SAFETY: PyUnicode_New(len, 127) makes a compact ASCII string with room for `len` bytes, which
    // are filled before the object is shared; interning may swap the pointer for an equal string.
    unsafe {
        let mut ptr = ffi::PyUnicode_New(bytes.len() as ffi::Py_ssize_t, 127);
        if ptr.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            ffi::PyUnicode_DATA(ptr) as *mut u8,
            bytes.len(),
        );
        ffi::PyUnicode_InternInPlace(&mut ptr);
        Bound::from_owned_ptr_or_opt(py, ptr)
    }
}

/// A `str` decoded from UTF-8 with pymongo's default "strict" handler, or `None` (error cleared).
///
/// ASCII (most text) is copied straight into a new 1-byte string, skipping the general decoder's
/// setup; lengths 0 and 1 go through CPython, which returns its shared singletons for them.
#[inline]
pub(super) fn decode_utf8<'py>(py: Python<'py>, bytes: &[u8]) -> Option<Bound<'py, PyAny>> {
    // SAFETY: PyUnicode_New(len, 127) makes a compact ASCII string with room for `len` bytes, filled
    // before it is shared; the decoder gets exactly `bytes`; NULL results become `None`.
    unsafe {
        let ptr = if bytes.len() > 1 && bytes.is_ascii() {
            let ptr = ffi::PyUnicode_New(bytes.len() as ffi::Py_ssize_t, 127);
            if !ptr.is_null() {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    ffi::PyUnicode_DATA(ptr) as *mut u8,
                    bytes.len(),
                );
            }
            ptr
        } else {
            ffi::PyUnicode_DecodeUTF8(
                bytes.as_ptr().cast(),
                bytes.len() as ffi::Py_ssize_t,
                c"strict".as_ptr(),
            )
        };
        if ptr.is_null() {
            ffi::PyErr_Clear();
        }
        Bound::from_owned_ptr_or_opt(py, ptr)
    }
}
