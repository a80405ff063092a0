//! Field-name strings, created once per call and reused: a small direct-mapped cache of interned
//! `str` objects keyed by their bytes.
//!
//! Documents in one buffer repeat the same field names, so a hit replaces pymongo's per-field decode
//! + allocation + hash (a cached, interned `str` already carries its hash into `PyDict_SetItem`) by
//! one byte comparison. Only ASCII names up to `MAX_CACHED_LEN` bytes are cached: their UTF-8 bytes
//! are the `str`'s own 1-byte data, so the comparison needs no copy.

use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;

const SLOTS: usize = 256;
const MAX_CACHED_LEN: usize = 64;

#[derive(Clone, Copy)]
struct Slot {
    /// Strong reference to a compact ASCII `str`, or `None`.
    key: Option<NonNull<ffi::PyObject>>,
    /// Its 1-byte data and length (valid while `key` is held).
    data: *const u8,
    len: usize,
}

const EMPTY: Slot = Slot { key: None, data: std::ptr::null(), len: 0 };

/// Owns its cached strings; dropped (with the GIL held, as the decoder holds it) at the end of a call.
pub(super) struct KeyCache<'py> {
    py: Python<'py>,
    slots: Vec<Slot>,
}

impl<'py> KeyCache<'py> {
    pub(super) fn new(py: Python<'py>) -> Self {
        // Allocated on first use: decoding one tiny document need not pay for the table.
        Self { py, slots: Vec::new() }
    }

    /// A new reference to the `str` for `bytes`, or `None` if they are not valid UTF-8.
    #[inline]
    pub(super) fn get(&mut self, bytes: &[u8]) -> Option<Bound<'py, PyAny>> {
        if bytes.len() > MAX_CACHED_LEN || !bytes.is_ascii() {
            return decode_utf8(self.py, bytes);
        }
        if self.slots.is_empty() {
            self.slots = vec![EMPTY; SLOTS];
        }
        let index = slot_index(bytes);
        let slot = self.slots.get_mut(index)?;
        if let Some(key) = slot.key {
            // SAFETY: `data` points at `len` bytes owned by `key`, which this slot keeps alive.
            if slot.len == bytes.len() && unsafe { std::slice::from_raw_parts(slot.data, slot.len) } == bytes {
                // SAFETY: `key` is a live object; the new strong reference goes to the caller.
                return Some(unsafe { Bound::from_borrowed_ptr(self.py, key.as_ptr()) });
            }
        }
        let key = new_ascii(self.py, bytes)?;
        let ptr = key.as_ptr();
        // SAFETY: `ptr` is a compact ASCII str made by `new_ascii`: its data is `len` 1-byte chars.
        let data = unsafe { ffi::PyUnicode_DATA(ptr) } as *const u8;
        let old = std::mem::replace(slot, Slot { key: NonNull::new(ptr), data, len: bytes.len() });
        // The slot's reference; the caller gets `key`'s.
        // SAFETY: `ptr` is live.
        unsafe { ffi::Py_INCREF(ptr) };
        release(old);
        Some(key)
    }
}

impl Drop for KeyCache<'_> {
    fn drop(&mut self) {
        for slot in self.slots.drain(..) {
            release(slot);
        }
    }
}

fn release(slot: Slot) {
    if let Some(key) = slot.key {
        // SAFETY: the slot owned one strong reference; the GIL is held (the cache carries `'py`).
        unsafe { ffi::Py_DECREF(key.as_ptr()) };
    }
}

/// A cheap hash of the first and last (up to) 8 bytes and the length: field names differ there.
#[inline]
fn slot_index(bytes: &[u8]) -> usize {
    let mut head = [0u8; 8];
    let mut tail = [0u8; 8];
    let n = bytes.len().min(8);
    head[..n].copy_from_slice(&bytes[..n]);
    tail[..n].copy_from_slice(&bytes[bytes.len() - n..]);
    let mixed = u64::from_le_bytes(head) ^ u64::from_le_bytes(tail).rotate_left(29) ^ bytes.len() as u64;
    (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SLOTS
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
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), ffi::PyUnicode_DATA(ptr) as *mut u8, bytes.len());
        ffi::PyUnicode_InternInPlace(&mut ptr);
        Bound::from_owned_ptr_or_opt(py, ptr)
    }
}

/// A `str` decoded from UTF-8 with pymongo's default "strict" handler, or `None` (error cleared).
pub(super) fn decode_utf8<'py>(py: Python<'py>, bytes: &[u8]) -> Option<Bound<'py, PyAny>> {
    // SAFETY: the pointer and length describe `bytes`; a NULL result is turned into `None`.
    unsafe {
        let ptr = ffi::PyUnicode_DecodeUTF8(bytes.as_ptr().cast(), bytes.len() as ffi::Py_ssize_t, c"strict".as_ptr());
        if ptr.is_null() {
            ffi::PyErr_Clear();
        }
        Bound::from_owned_ptr_or_opt(py, ptr)
    }
}
