//! pymongo's `bson` value classes, imported once per interpreter, and how each BSON value becomes one.
//!
//! Values are what pymongo's C decoder builds with the default `CodecOptions` (same classes, same
//! state), so `==`, `type()` and `repr()` agree; `fast` skips the Python-level constructors where it
//! was verified to build identical objects.

// Makes ints and bytes, calls classes (vectorcall) and datetimes via CPython's C API, for speed.
#![allow(unsafe_code)]

use pyo3::exceptions::PyImportError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;

use super::fast::{verified_binary, verified_slots, BinaryBuilder, SlotBuilder};

pub(super) struct BsonTypes {
    object_id: Py<PyAny>,
    object_id_fast: Option<SlotBuilder>,
    int64: Py<PyAny>,
    timestamp: Py<PyAny>,
    timestamp_fast: Option<SlotBuilder>,
    decimal128_from_bid: Py<PyAny>,
    decimal128_fast: Option<SlotBuilder>,
    binary: Py<PyAny>,
    binary_fast: Option<BinaryBuilder>,
    regex: Py<PyAny>,
    regex_fast: Option<SlotBuilder>,
    code: Py<PyAny>,
    dbref: Py<PyAny>,
    min_key: Py<PyAny>,
    max_key: Py<PyAny>,
}

static TYPES: PyOnceLock<BsonTypes> = PyOnceLock::new();

impl BsonTypes {
    /// The classes, imported from pymongo's `bson` package on first use.
    pub(super) fn get(py: Python<'_>) -> PyResult<&'static BsonTypes> {
        TYPES.get_or_try_init(py, || {
            let attr = |module: &str, name: &str| -> PyResult<Bound<'_, PyAny>> {
                py.import(module)?.getattr(name)
            };
            // SAFETY: imports the datetime C API capsule (idempotent); checked right after.
            unsafe { ffi::PyDateTime_IMPORT() };
            // SAFETY: reading the pointer the import just set.
            if unsafe { ffi::PyDateTimeAPI() }.is_null() {
                return Err(PyErr::take(py)
                    .unwrap_or_else(|| PyImportError::new_err("datetime C API unavailable")));
            }
            let object_id = attr("bson.objectid", "ObjectId")?;
            let timestamp = attr("bson.timestamp", "Timestamp")?;
            let decimal128 = attr("bson.decimal128", "Decimal128")?;
            let binary = attr("bson.binary", "Binary")?;
            let regex = attr("bson.regex", "Regex")?;
            let int =
                |v: u64| -> PyResult<Bound<'_, PyAny>> { Ok(v.into_pyobject(py)?.into_any()) };
            let oid = PyBytes::new(py, b"0123456789ab").into_any();
            let (high, low) = (0x3040_0000_0000_0000u64, 1234u64);
            let bid =
                PyBytes::new(py, &[low.to_le_bytes(), high.to_le_bytes()].concat()).into_any();
            let pattern = "a+b".into_pyobject(py)?.into_any();
            Ok(BsonTypes {
                object_id_fast: verified_slots(
                    &object_id,
                    &["_ObjectId__id"],
                    std::slice::from_ref(&oid),
                    &object_id.call1((&oid,))?,
                ),
                timestamp_fast: verified_slots(
                    &timestamp,
                    &["_Timestamp__time", "_Timestamp__inc"],
                    &[int(1)?, int(2)?],
                    &timestamp.call1((1, 2))?,
                ),
                decimal128_fast: verified_slots(
                    &decimal128,
                    &["_Decimal128__high", "_Decimal128__low"],
                    &[int(high)?, int(low)?],
                    &decimal128.call_method1("from_bid", (bid,))?,
                ),
                regex_fast: verified_slots(
                    &regex,
                    &["pattern", "flags"],
                    &[pattern.clone(), int(10)?],
                    &regex.call1((pattern, 10))?,
                ),
                binary_fast: verified_binary(&binary),
                object_id: object_id.unbind(),
                int64: attr("bson.int64", "Int64")?.unbind(),
                timestamp: timestamp.unbind(),
                decimal128_from_bid: decimal128.getattr("from_bid")?.unbind(),
                binary: binary.unbind(),
                regex: regex.unbind(),
                code: attr("bson.code", "Code")?.unbind(),
                dbref: attr("bson.dbref", "DBRef")?.unbind(),
                min_key: attr("bson.min_key", "MinKey")?.unbind(),
                max_key: attr("bson.max_key", "MaxKey")?.unbind(),
            })
        })
    }

    /// Which classes are built by `fast` (true) rather than by calling them.
    pub(super) fn fast_paths(&self) -> [(&'static str, bool); 5] {
        [
            ("ObjectId", self.object_id_fast.is_some()),
            ("Timestamp", self.timestamp_fast.is_some()),
            ("Decimal128", self.decimal128_fast.is_some()),
            ("Regex", self.regex_fast.is_some()),
            ("Binary", self.binary_fast.is_some()),
        ]
    }

    pub(super) fn object_id<'py>(
        &self,
        py: Python<'py>,
        oid: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let bytes = new_bytes(py, oid)?;
        match &self.object_id_fast {
            Some(fast) => fast.build(py, &[bytes.as_ptr()]),
            None => call(py, &self.object_id, &[bytes.as_ptr()]),
        }
    }

    pub(super) fn int64<'py>(&self, py: Python<'py>, value: i64) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: returns a new reference or NULL with an exception set.
        let int = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(value))? };
        call(py, &self.int64, &[int.as_ptr()])
    }

    pub(super) fn timestamp<'py>(
        &self,
        py: Python<'py>,
        time: u32,
        inc: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: returns a new reference or NULL with an exception set.
        let time =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLong(time.into()))? };
        // SAFETY: as above.
        let inc =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLong(inc.into()))? };
        match &self.timestamp_fast {
            Some(fast) => fast.build(py, &[time.as_ptr(), inc.as_ptr()]),
            None => call(py, &self.timestamp, &[time.as_ptr(), inc.as_ptr()]),
        }
    }

    /// `bid` is the 16-byte little-endian BID encoding (low 8 bytes first).
    pub(super) fn decimal128<'py>(
        &self,
        py: Python<'py>,
        bid: &[u8; 16],
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(fast) = &self.decimal128_fast else {
            let bytes = new_bytes(py, bid)?;
            return call(py, &self.decimal128_from_bid, &[bytes.as_ptr()]);
        };
        let [low, high] = [&bid[..8], &bid[8..]].map(|half| {
            let mut word = [0u8; 8];
            word.copy_from_slice(half);
            u64::from_le_bytes(word)
        });
        // SAFETY: returns a new reference or NULL with an exception set.
        let high =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLongLong(high))? };
        // SAFETY: as above.
        let low =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLongLong(low))? };
        fast.build(py, &[high.as_ptr(), low.as_ptr()])
    }

    /// pymongo decodes subtype 0 to `bytes`, every other subtype (UUIDs included, as the default
    /// `uuid_representation` is UNSPECIFIED) to `Binary(data, subtype)`.
    pub(super) fn binary<'py>(
        &self,
        py: Python<'py>,
        subtype: u8,
        data: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let bytes = new_bytes(py, data)?;
        if subtype == 0 {
            return Ok(bytes);
        }
        let subtype = small_int(py, subtype.into())?;
        match &self.binary_fast {
            Some(fast) => fast.build(py, &bytes, &subtype),
            None => call(py, &self.binary, &[bytes.as_ptr(), subtype.as_ptr()]),
        }
    }

    pub(super) fn regex<'py>(
        &self,
        py: Python<'py>,
        pattern: &Bound<'py, PyAny>,
        flags: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        // pymongo's C decoder maps these letters to `re` flags and ignores any other character.
        let mut bits = 0;
        for flag in flags {
            bits |= match flag {
                b'i' => 2,
                b'l' => 4,
                b'm' => 8,
                b's' => 16,
                b'u' => 32,
                b'x' => 64,
                _ => 0,
            };
        }
        let bits = small_int(py, bits)?;
        // The fast-path-or-call pair, as for timestamp: each type has its own constructor.
        match &self.regex_fast {
            Some(fast) => fast.build(py, &[pattern.as_ptr(), bits.as_ptr()]),
            None => call(py, &self.regex, &[pattern.as_ptr(), bits.as_ptr()]),
        }
    }

    pub(super) fn code<'py>(
        &self,
        py: Python<'py>,
        code: &Bound<'py, PyAny>,
        scope: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match scope {
            Some(scope) => call(py, &self.code, &[code.as_ptr(), scope.as_ptr()]),
            None => call(py, &self.code, &[code.as_ptr()]),
        }
    }

    /// `DBRef(collection, id, database, extra_fields)`; `database` is `None` when absent.
    pub(super) fn dbref<'py>(
        &self,
        py: Python<'py>,
        args: &[&Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyAny>> {
        let ptrs: Vec<*mut ffi::PyObject> = args.iter().map(|a| a.as_ptr()).collect();
        call(py, &self.dbref, &ptrs)
    }

    pub(super) fn min_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        call(py, &self.min_key, &[])
    }

    pub(super) fn max_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        call(py, &self.max_key, &[])
    }
}

/// `callable(*args)` through vectorcall (no argument tuple).
fn call<'py>(
    py: Python<'py>,
    callable: &Py<PyAny>,
    args: &[*mut ffi::PyObject],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `args` are live borrowed references for the duration of the call.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyObject_Vectorcall(
                callable.as_ptr(),
                args.as_ptr(),
                args.len(),
                std::ptr::null_mut(),
            ),
        )
    }
}

pub(super) fn new_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: copies `data.len()` bytes from `data`.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyBytes_FromStringAndSize(data.as_ptr().cast(), data.len() as ffi::Py_ssize_t),
        )
    }
}

fn small_int(py: Python<'_>, value: i64) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: returns a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(value)) }
}

/// A naive `datetime` for UTC milliseconds since the epoch, as pymongo returns with the default
/// `tz_aware=False`; `None` when outside `datetime`'s years 1..=9999 (pymongo raises there too).
pub(super) fn datetime(py: Python<'_>, millis: i64) -> Option<PyResult<Bound<'_, PyAny>>> {
    let micros = (millis.rem_euclid(1000) * 1000) as i32;
    let seconds = millis.div_euclid(1000);
    let (days, second_of_day) = (
        seconds.div_euclid(86_400),
        seconds.rem_euclid(86_400) as i32,
    );
    let (year, month, day) = civil_from_days(days);
    if !(1..=9999).contains(&year) {
        return None;
    }
    // SAFETY: BsonTypes::get imported the C API before any decoder can run; arguments are in range.
    Some(unsafe {
        let api = &*ffi::PyDateTimeAPI();
        let ptr = (api.DateTime_FromDateAndTime)(
            year as i32,
            month,
            day,
            second_of_day / 3600,
            second_of_day / 60 % 60,
            second_of_day % 60,
            micros,
            ffi::Py_None(),
            api.DateTimeType,
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    })
}

/// Proleptic Gregorian (year, month, day) of a day count from 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm, in 400-year eras).
fn civil_from_days(days: i64) -> (i64, i32, i32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as i32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as i32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        // 0001-01-01 and 9999-12-31, datetime's bounds.
        assert_eq!(civil_from_days(-719_162), (1, 1, 1));
        assert_eq!(civil_from_days(2_932_896), (9999, 12, 31));
    }
}
