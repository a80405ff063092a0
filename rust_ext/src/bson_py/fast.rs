//! Building pymongo's small value classes without running their Python-level constructors.
//!
//! `ObjectId`, `Timestamp`, `Regex` and `Decimal128` keep their state in `__slots__`, and `Binary` is a
//! `bytes` subclass with its subtype in the instance `__dict__`; their `__init__`/`__new__` are Python
//! code that dominated decoding the `types` dataset (callgrind: `Binary(...)` alone was 29% of it). A
//! builder allocates the instance and stores the slots through their member descriptors. Each builder is
//! checked once against the real constructor (type, `==`, `repr`, every slot, `vars`); if pymongo ever
//! changes a class so that the check fails, the decoder calls the class instead.

// Builds instances through CPython type slots and member descriptors directly, which needs the C API.
#![allow(unsafe_code)]

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

/// Allocates an instance of `cls` and fills the named slots, in order.
pub(super) struct SlotBuilder {
    cls: Py<PyType>,
    slots: Vec<(Py<PyAny>, ffi::descrsetfunc)>,
}

impl SlotBuilder {
    /// `None` unless every name is a plain member (slot) descriptor of `cls`.
    fn new(cls: &Bound<'_, PyAny>, names: &[&str]) -> Option<Self> {
        let cls = cls.cast::<PyType>().ok()?.clone();
        let mut slots = Vec::new();
        for name in names {
            let descr = cls.getattr(*name).ok()?;
            if descr.get_type().name().ok()?.to_str().ok()? != "member_descriptor" {
                return None;
            }
            // SAFETY: reading the type slot of a live object's type.
            let set = unsafe { (*ffi::Py_TYPE(descr.as_ptr())).tp_descr_set }?;
            slots.push((descr.unbind(), set));
        }
        Some(Self {
            cls: cls.unbind(),
            slots,
        })
    }

    /// A new instance with `values[i]` stored in slot `i` (borrowed references).
    pub(super) fn build<'py>(
        &self,
        py: Python<'py>,
        values: &[*mut ffi::PyObject],
    ) -> PyResult<Bound<'py, PyAny>> {
        let tp = self.cls.as_ptr().cast::<ffi::PyTypeObject>();
        // SAFETY: `tp` is a live heap type; tp_alloc returns a new zeroed instance (GC-tracked for GC
        // types) or NULL with an exception set. Member descriptors store a new reference to the value.
        unsafe {
            let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            let obj = Bound::from_owned_ptr_or_err(py, alloc(tp, 0))?;
            for ((descr, set), value) in self.slots.iter().zip(values) {
                if set(descr.as_ptr(), obj.as_ptr(), *value) < 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            Ok(obj)
        }
    }
}

/// `Binary(data, subtype)` as `bytes.__new__(Binary, data)` plus its `_Binary__subtype` attribute.
pub(super) struct BinaryBuilder {
    cls: Py<PyType>,
    attr: Py<PyString>,
}

impl BinaryBuilder {
    pub(super) fn build<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        subtype: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PyTuple::new(py, [data])?;
        // SAFETY: bytes' tp_new with a bytes subtype and a 1-tuple builds the subtype instance (new
        // reference or NULL with an exception set).
        let obj = unsafe {
            let new = (*std::ptr::addr_of_mut!(ffi::PyBytes_Type))
                .tp_new
                .ok_or_else(|| PyErr::fetch(py))?;
            Bound::from_owned_ptr_or_err(
                py,
                new(
                    self.cls.as_ptr().cast(),
                    args.as_ptr(),
                    std::ptr::null_mut(),
                ),
            )?
        };
        obj.setattr(self.attr.bind(py), subtype)?;
        Ok(obj)
    }
}

/// Whether `fast` is indistinguishable from `slow`: same type, `==`, `repr`, the named attributes and
/// (where there is one) the instance `__dict__`.
fn same(fast: &Bound<'_, PyAny>, slow: &Bound<'_, PyAny>, attrs: &[&str]) -> PyResult<bool> {
    if !fast.get_type().is(slow.get_type())
        || !fast.eq(slow)?
        || fast.repr()?.to_str()? != slow.repr()?.to_str()?
    {
        return Ok(false);
    }
    for attr in attrs.iter().chain(&["__dict__"]) {
        match (fast.getattr(*attr), slow.getattr(*attr)) {
            (Ok(a), Ok(b)) if a.eq(&b)? => {}
            (Err(_), Err(_)) => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// A slot builder for `cls` if it reproduces `cls(*sample)` exactly.
pub(super) fn verified_slots(
    cls: &Bound<'_, PyAny>,
    names: &[&str],
    sample: &[Bound<'_, PyAny>],
    slow: &Bound<'_, PyAny>,
) -> Option<SlotBuilder> {
    let builder = SlotBuilder::new(cls, names)?;
    let values: Vec<_> = sample.iter().map(|v| v.as_ptr()).collect();
    let fast = builder.build(cls.py(), &values).ok()?;
    same(&fast, slow, names).ok()?.then_some(builder)
}

/// A `Binary` builder if it reproduces `Binary(b"\x01\x02", 4)` exactly.
pub(super) fn verified_binary(cls: &Bound<'_, PyAny>) -> Option<BinaryBuilder> {
    let py = cls.py();
    let builder = BinaryBuilder {
        cls: cls.cast::<PyType>().ok()?.clone().unbind(),
        attr: PyString::intern(py, "_Binary__subtype").unbind(),
    };
    let data = pyo3::types::PyBytes::new(py, b"\x01\x02").into_any();
    let subtype = 4i32.into_pyobject(py).ok()?.into_any();
    let fast = builder.build(py, &data, &subtype).ok()?;
    let slow = cls.call1((data, subtype)).ok()?;
    same(&fast, &slow, &["subtype"]).ok()?.then_some(builder)
}
