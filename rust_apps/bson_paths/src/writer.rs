//! A tiny infallible BSON encoder for the generated datasets.
//!
//! Hand-written rather than `bson::to_vec` so that generation never returns an error and the bytes are
//! exactly those pymongo's `bson.encode` writes for the same Python values (the tests compare them).

use std::io::Write;

/// Element type bytes of the BSON spec used by the datasets.
mod tag {
    pub(super) const DOUBLE: u8 = 0x01;
    pub(super) const STRING: u8 = 0x02;
    pub(super) const DOCUMENT: u8 = 0x03;
    pub(super) const ARRAY: u8 = 0x04;
    pub(super) const BINARY: u8 = 0x05;
    pub(super) const OBJECT_ID: u8 = 0x07;
    pub(super) const BOOL: u8 = 0x08;
    pub(super) const DATETIME: u8 = 0x09;
    pub(super) const NULL: u8 = 0x0A;
    pub(super) const REGEX: u8 = 0x0B;
    pub(super) const INT32: u8 = 0x10;
    pub(super) const TIMESTAMP: u8 = 0x11;
    pub(super) const INT64: u8 = 0x12;
    pub(super) const DECIMAL128: u8 = 0x13;
}

/// Appends documents to a buffer; `begin_*`/`end` pairs nest and back-patch the length prefixes.
///
/// A document longer than `i32::MAX` bytes gets a saturated (so invalid) length prefix: decoders reject
/// it, nothing panics.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
    open: Vec<usize>,
}

impl Writer {
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Self {
            buf: Vec::with_capacity(bytes),
            open: Vec::new(),
        }
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Starts a top-level document (or a document inside `begin_doc`/`begin_array` after its key).
    pub(crate) fn begin(&mut self) {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&[0; 4]);
    }

    /// Closes the innermost open document or array.
    pub(crate) fn end(&mut self) {
        self.buf.push(0);
        if let Some(start) = self.open.pop() {
            let len = i32::try_from(self.buf.len() - start).unwrap_or(i32::MAX);
            if let Some(prefix) = self.buf.get_mut(start..start + 4) {
                prefix.copy_from_slice(&len.to_le_bytes());
            }
        }
    }

    fn key(&mut self, tag: u8, key: &str) {
        self.buf.push(tag);
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.push(0);
    }

    /// An array element's key: its decimal index.
    pub(crate) fn index_key(&mut self, tag: u8, index: usize) {
        self.buf.push(tag);
        // Writing into a Vec cannot fail.
        let _ = write!(self.buf, "{index}");
        self.buf.push(0);
    }

    pub(crate) fn begin_doc(&mut self, key: &str) {
        self.key(tag::DOCUMENT, key);
        self.begin();
    }

    pub(crate) fn begin_array(&mut self, key: &str) {
        self.key(tag::ARRAY, key);
        self.begin();
    }

    pub(crate) fn begin_doc_at(&mut self, index: usize) {
        self.index_key(tag::DOCUMENT, index);
        self.begin();
    }

    pub(crate) fn double(&mut self, key: &str, value: f64) {
        self.key(tag::DOUBLE, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    // Keyed and indexed twins per BSON type (as string, int32): only the element header differs.
    pub(crate) fn double_at(&mut self, index: usize, value: f64) {
        self.index_key(tag::DOUBLE, index);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    fn string_value(&mut self, value: &str) {
        let len = i32::try_from(value.len() + 1).unwrap_or(i32::MAX);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
    }

    pub(crate) fn string(&mut self, key: &str, value: &str) {
        self.key(tag::STRING, key);
        self.string_value(value);
    }

    pub(crate) fn string_at(&mut self, index: usize, value: &str) {
        self.index_key(tag::STRING, index);
        self.string_value(value);
    }

    pub(crate) fn int32(&mut self, key: &str, value: i32) {
        self.key(tag::INT32, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn int32_at(&mut self, index: usize, value: i32) {
        self.index_key(tag::INT32, index);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn int64(&mut self, key: &str, value: i64) {
        self.key(tag::INT64, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn bool(&mut self, key: &str, value: bool) {
        self.key(tag::BOOL, key);
        self.buf.push(u8::from(value));
    }

    pub(crate) fn bool_at(&mut self, index: usize, value: bool) {
        self.index_key(tag::BOOL, index);
        self.buf.push(u8::from(value));
    }

    pub(crate) fn null(&mut self, key: &str) {
        self.key(tag::NULL, key);
    }

    /// UTC milliseconds since the Unix epoch.
    pub(crate) fn datetime(&mut self, key: &str, millis: i64) {
        self.key(tag::DATETIME, key);
        self.buf.extend_from_slice(&millis.to_le_bytes());
    }

    pub(crate) fn binary(&mut self, key: &str, subtype: u8, data: &[u8]) {
        self.key(tag::BINARY, key);
        let len = i32::try_from(data.len()).unwrap_or(i32::MAX);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.push(subtype);
        self.buf.extend_from_slice(data);
    }

    pub(crate) fn object_id(&mut self, key: &str, oid: [u8; 12]) {
        self.key(tag::OBJECT_ID, key);
        self.buf.extend_from_slice(&oid);
    }

    /// `pattern` and `flags` must not contain NUL bytes (the datasets' literals do not).
    pub(crate) fn regex(&mut self, key: &str, pattern: &str, flags: &str) {
        self.key(tag::REGEX, key);
        self.buf.extend_from_slice(pattern.as_bytes());
        self.buf.push(0);
        self.buf.extend_from_slice(flags.as_bytes());
        self.buf.push(0);
    }

    /// BSON stores the increment in the low four bytes, the seconds in the high four.
    pub(crate) fn timestamp(&mut self, key: &str, time: u32, increment: u32) {
        self.key(tag::TIMESTAMP, key);
        self.buf.extend_from_slice(&increment.to_le_bytes());
        self.buf.extend_from_slice(&time.to_le_bytes());
    }

    /// Decimal128 in its 16-byte little-endian BID encoding.
    pub(crate) fn decimal128(&mut self, key: &str, bid: [u8; 16]) {
        self.key(tag::DECIMAL128, key);
        self.buf.extend_from_slice(&bid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_is_five_bytes() {
        let mut w = Writer::default();
        w.begin();
        w.end();
        assert_eq!(w.into_bytes(), vec![5, 0, 0, 0, 0]);
    }

    #[test]
    fn nested_lengths_are_back_patched() {
        let mut w = Writer::default();
        w.begin();
        w.begin_array("a");
        w.int32_at(0, 7);
        w.end();
        w.end();
        let bytes = w.into_bytes();
        // {"a": [7]}: outer 4 + (1 + "a\0" + inner 12) + 1; inner 4 + (1 + "0\0" + 4) + 1.
        assert_eq!(&bytes[..4], &20i32.to_le_bytes());
        assert_eq!(&bytes[7..11], &12i32.to_le_bytes());
        assert_eq!(bytes.len(), 20);
    }
}
