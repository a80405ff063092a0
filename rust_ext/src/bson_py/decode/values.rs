//! The length-prefixed and composite values of the decoder: strings, binary, regex, code with scope,
//! and pymongo's DBRef hook. Lengths are checked against the enclosing document exactly as in
//! `decode`'s module docs.

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::{fail, py_fail, DecodeError, Decoded, Decoder};
use crate::bson_py::keys::decode_utf8;

impl<'py> Decoder<'py, '_> {
    /// Length prefix of an embedded document or array at `at`: at least 5, inside `end`, NUL-terminated.
    pub(super) fn sub_document_size(&self, at: usize, end: usize) -> Result<usize, DecodeError> {
        if end - at < 4 {
            return fail(at, "embedded document length runs past its document");
        }
        let size = self.u32_at(at) as usize;
        if size < 5 || size > end - at {
            return fail(
                at,
                format!("embedded document length {size} does not fit its document"),
            );
        }
        if self.data[at + size - 1] != 0 {
            return fail(
                at + size - 1,
                "embedded document is not terminated by a NUL byte",
            );
        }
        Ok(size)
    }

    /// A length-prefixed, NUL-terminated UTF-8 string (string, symbol, code, DBPointer collection).
    pub(super) fn string(&mut self, pos: &mut usize, end: usize) -> Decoded<'py> {
        let at = *pos;
        if end - at < 4 {
            return fail(at, "string length runs past its document");
        }
        let len = self.u32_at(at) as usize;
        if len == 0 || len > end - at - 4 {
            return fail(at, format!("string length {len} does not fit its document"));
        }
        if self.data[at + 4 + len - 1] != 0 {
            return fail(at + 4 + len - 1, "string is not terminated by a NUL byte");
        }
        let Some(value) = decode_utf8(self.py, &self.data[at + 4..at + 3 + len]) else {
            return fail(at + 4, "string is not valid UTF-8");
        };
        *pos = at + 4 + len;
        Ok(value)
    }

    // Length-checked like string(): each BSON type has its own header size and error text.
    pub(super) fn binary(&mut self, pos: &mut usize, end: usize) -> Decoded<'py> {
        let at = *pos;
        if end - at < 5 {
            return fail(at, "binary header runs past its document");
        }
        let len = self.u32_at(at) as usize;
        if len > end - at - 5 {
            return fail(at, format!("binary length {len} does not fit its document"));
        }
        let subtype = self.data[at + 4];
        let mut data = &self.data[at + 5..at + 5 + len];
        if subtype == 2 {
            // The old binary subtype repeats the length inside the payload.
            if len < 4 || self.u32_at(at + 5) as usize != len - 4 {
                return fail(at + 5, "binary subtype 2 inner length does not match");
            }
            data = &data[4..];
        }
        *pos = at + 5 + len;
        self.types
            .binary(self.py, subtype, data)
            .map_err(|e| py_fail(at, e))
    }

    pub(super) fn regex(&mut self, pos: &mut usize, end: usize) -> Decoded<'py> {
        let at = *pos;
        let Some(pattern_len) = self.data[at..end].iter().position(|&b| b == 0) else {
            return fail(at, "regex pattern runs past its document");
        };
        let Some(pattern) = decode_utf8(self.py, &self.data[at..at + pattern_len]) else {
            return fail(at, "regex pattern is not valid UTF-8");
        };
        let flags_at = at + pattern_len + 1;
        let Some(flags_len) = self.data[flags_at..end].iter().position(|&b| b == 0) else {
            return fail(flags_at, "regex flags run past its document");
        };
        let flags = &self.data[flags_at..flags_at + flags_len];
        if std::str::from_utf8(flags).is_err() {
            return fail(flags_at, "regex flags are not valid UTF-8");
        }
        *pos = flags_at + flags_len + 1;
        self.types
            .regex(self.py, &pattern, flags)
            .map_err(|e| py_fail(at, e))
    }

    /// `Code(code, scope)`: total length, string, scope document, the lengths agreeing exactly.
    pub(super) fn code_with_scope(&mut self, pos: &mut usize, end: usize) -> Decoded<'py> {
        let at = *pos;
        let available = end - at;
        if available < 8 {
            return fail(at, "code with scope runs past its document");
        }
        let total = self.u32_at(at) as usize;
        let code_len = self.u32_at(at + 4) as usize;
        if total > available || code_len == 0 || code_len + 12 > available {
            return fail(at, "code with scope length does not fit its document");
        }
        let mut code_pos = at + 4;
        let code = self.string(&mut code_pos, end)?;
        let scope_at = code_pos;
        let scope_len = self.u32_at(scope_at) as usize;
        if scope_len < 5 || 8 + code_len + scope_len != total {
            return fail(scope_at, "code with scope lengths disagree");
        }
        if self.data[scope_at + scope_len - 1] != 0 {
            return fail(
                scope_at + scope_len - 1,
                "code scope is not terminated by a NUL byte",
            );
        }
        let (scope, _) = self.document(scope_at, scope_len)?;
        *pos = at + total;
        self.types
            .code(self.py, &code, Some(&scope))
            .map_err(|e| py_fail(at, e))
    }

    /// pymongo turns a sub-document with a string `$ref`, an `$id` and an optional string (or null)
    /// `$db` into `DBRef(ref, id, db, rest)`; anything else stays a dict.
    #[inline(never)]
    pub(super) fn dbref_hook(&mut self, doc: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let ref_ = doc.get_item("$ref")?;
        let id = doc.get_item("$id")?;
        let db = match doc.contains("$db")? {
            true => doc.get_item("$db")?,
            false => py.None().into_bound(py),
        };
        if !ref_.is_instance_of::<PyString>() || !(db.is_none() || db.is_instance_of::<PyString>())
        {
            return Ok(doc);
        }
        doc.del_item("$ref")?;
        doc.del_item("$id")?;
        if doc.contains("$db")? {
            doc.del_item("$db")?;
        }
        self.types.dbref(py, &[&ref_, &id, &db, &doc])
    }
}
