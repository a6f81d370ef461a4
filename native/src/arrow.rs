//! Columns handed to polars through the Arrow C data interface (the "Arrow PyCapsule
//! interface": an object whose `__arrow_c_array__` returns an `arrow_schema` and an
//! `arrow_array` capsule), so the Python side builds its frames from the native core's vectors
//! without copying them through Python objects and without numpy.
//!
//! Only what the metric columns need is written here, by hand, from the specification
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>): a struct array of primitive
//! children (float64, uint8, uint16), or one primitive array on its own, a float64 column's NaN
//! taken as null (a validity bitmap, least significant bit first, 1 = valid). The consumer moves
//! the structs out of the capsules and calls `release` when it lets the buffers go; a capsule
//! never consumed releases them itself.
//!
//! A consumer holds a struct's children through the struct: one child kept keeps every child's
//! buffers. Columns kept for long (the blocks of a long trace, until the trace is finished) are
//! therefore exported one by one ([`primitive_array`]), so each is freed when it is let go.

use std::ffi::{c_char, c_void, CString};

/// `ARROW_FLAG_NULLABLE`
const NULLABLE: i64 = 2;

#[repr(C)]
pub struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

// SAFETY: the structs own what they point to (their private data) and are moved, not shared
unsafe impl Send for ArrowSchema {}
unsafe impl Send for ArrowArray {}

/// The values of one child column.
pub enum Values {
    F64(Vec<f64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Values {
    pub(crate) fn len(&self) -> usize {
        match self {
            Values::F64(v) => v.len(),
            Values::U8(v) => v.len(),
            Values::U16(v) => v.len(),
        }
    }

    fn format(&self) -> &'static str {
        match self {
            Values::F64(_) => "g",
            Values::U8(_) => "C",
            Values::U16(_) => "S",
        }
    }

    fn pointer(&self) -> *const c_void {
        match self {
            Values::F64(v) => v.as_ptr() as *const c_void,
            Values::U8(v) => v.as_ptr() as *const c_void,
            Values::U16(v) => v.as_ptr() as *const c_void,
        }
    }
}

/// A named child column; `nan_is_null`: a float64 column's NaN becomes null.
pub struct Column {
    pub name: String,
    pub values: Values,
    pub nan_is_null: bool,
}

impl Column {
    /// The values that are null (a float64 column's NaN where `nan_is_null`).
    pub fn null_count(&self) -> usize {
        match (&self.values, self.nan_is_null) {
            (Values::F64(v), true) => v.iter().filter(|x| x.is_nan()).count(),
            _ => 0,
        }
    }
}

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    children: Vec<*mut ArrowSchema>,
}

struct ArrayPrivate {
    _values: Option<Values>,
    _validity: Option<Vec<u8>>,
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    if schema.is_null() || (*schema).release.is_none() {
        return;
    }
    let private = Box::from_raw((*schema).private_data as *mut SchemaPrivate);
    for &child in &private.children {
        if let Some(release) = (*child).release {
            release(child);
        }
        drop(Box::from_raw(child));
    }
    (*schema).release = None;
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    if array.is_null() || (*array).release.is_none() {
        return;
    }
    let private = Box::from_raw((*array).private_data as *mut ArrayPrivate);
    for &child in &private.children {
        if let Some(release) = (*child).release {
            release(child);
        }
        drop(Box::from_raw(child));
    }
    (*array).release = None;
}

fn schema(format: &str, name: &str, flags: i64, children: Vec<*mut ArrowSchema>) -> ArrowSchema {
    let format = CString::new(format).expect("a format has no NUL");
    let name = CString::new(name.replace('\0', "")).expect("NULs removed");
    let mut private = Box::new(SchemaPrivate { _format: format, _name: name, children });
    let out = ArrowSchema {
        format: private._format.as_ptr(),
        name: private._name.as_ptr(),
        metadata: std::ptr::null(),
        flags,
        n_children: private.children.len() as i64,
        children: private.children.as_mut_ptr(),
        dictionary: std::ptr::null_mut(),
        release: Some(release_schema),
        private_data: std::ptr::null_mut(),
    };
    ArrowSchema { private_data: Box::into_raw(private) as *mut c_void, ..out }
}

/// The validity bitmap of a float64 column whose NaN are null, and its null count (`None`:
/// no null, no bitmap).
fn validity(values: &[f64]) -> Option<(Vec<u8>, usize)> {
    let nulls = values.iter().filter(|v| v.is_nan()).count();
    if nulls == 0 {
        return None;
    }
    let mut bits = vec![0u8; values.len().div_ceil(8)];
    for (i, v) in values.iter().enumerate() {
        if !v.is_nan() {
            bits[i / 8] |= 1 << (i % 8);
        }
    }
    Some((bits, nulls))
}

fn child_array(column: Column) -> ArrowArray {
    let length = column.values.len() as i64;
    let (bitmap, null_count) = match (&column.values, column.nan_is_null) {
        (Values::F64(v), true) => match validity(v) {
            Some((bits, nulls)) => (Some(bits), nulls as i64),
            None => (None, 0),
        },
        _ => (None, 0),
    };
    let validity_pointer =
        bitmap.as_ref().map_or(std::ptr::null(), |b| b.as_ptr() as *const c_void);
    let mut private = Box::new(ArrayPrivate {
        buffers: vec![validity_pointer, column.values.pointer()],
        _values: Some(column.values),
        _validity: bitmap,
        children: Vec::new(),
    });
    let buffers = private.buffers.as_mut_ptr();
    ArrowArray {
        length,
        null_count,
        offset: 0,
        n_buffers: 2,
        n_children: 0,
        buffers,
        children: std::ptr::null_mut(),
        dictionary: std::ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

/// The columns (all of one length) as a struct array without nulls of its own, and its schema.
pub fn struct_array(columns: Vec<Column>) -> (ArrowSchema, ArrowArray) {
    let length = columns.first().map_or(0, |c| c.values.len());
    assert!(columns.iter().all(|c| c.values.len() == length), "columns of one length");
    let mut child_schemas = Vec::with_capacity(columns.len());
    let mut child_arrays = Vec::with_capacity(columns.len());
    for column in columns {
        let flags = if column.nan_is_null { NULLABLE } else { 0 };
        child_schemas.push(Box::into_raw(Box::new(schema(
            column.values.format(),
            &column.name,
            flags,
            Vec::new(),
        ))));
        child_arrays.push(Box::into_raw(Box::new(child_array(column))));
    }
    let parent_schema = schema("+s", "", 0, child_schemas);
    let mut private = Box::new(ArrayPrivate {
        _values: None,
        _validity: None,
        buffers: vec![std::ptr::null()],
        children: child_arrays,
    });
    let array = ArrowArray {
        length: length as i64,
        null_count: 0,
        offset: 0,
        n_buffers: 1,
        n_children: private.children.len() as i64,
        buffers: private.buffers.as_mut_ptr(),
        children: private.children.as_mut_ptr(),
        dictionary: std::ptr::null_mut(),
        release: Some(release_array),
        private_data: std::ptr::null_mut(),
    };
    let array = ArrowArray { private_data: Box::into_raw(private) as *mut c_void, ..array };
    (parent_schema, array)
}

/// One column as a primitive array of its own, and its schema (named as the column).
pub fn primitive_array(column: Column) -> (ArrowSchema, ArrowArray) {
    let flags = if column.nan_is_null { NULLABLE } else { 0 };
    let schema = schema(column.values.format(), &column.name, flags, Vec::new());
    (schema, child_array(column))
}

/// Releases what a struct made here still holds (a capsule that was never consumed).
pub fn release_unconsumed(schema: &mut ArrowSchema, array: &mut ArrowArray) {
    // SAFETY: the structs were made by `struct_array`; a consumer that moved them out set
    // their `release` to None, and release functions are idempotent on that
    unsafe {
        release_schema(schema);
        release_array(array);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_marks_nan_as_null() {
        let (bits, nulls) =
            validity(&[1.0, f64::NAN, 3.0, f64::NAN, 5.0, 6.0, 7.0, 8.0, f64::NAN]).expect("nulls");
        assert_eq!(nulls, 3);
        assert_eq!(bits, vec![0b1111_0101, 0]);
        assert!(validity(&[1.0, 2.0]).is_none());
    }

    #[test]
    fn a_struct_array_is_made_and_released() {
        let (mut s, mut a) = struct_array(vec![
            Column { name: "t".into(), values: Values::F64(vec![1.0, 2.0]), nan_is_null: false },
            Column { name: "k".into(), values: Values::U8(vec![0, 1]), nan_is_null: false },
            Column {
                name: "v".into(),
                values: Values::F64(vec![f64::NAN, 2.0]),
                nan_is_null: true,
            },
        ]);
        assert_eq!((a.length, a.n_children, s.n_children), (2, 3, 3));
        // SAFETY: the children were just made
        unsafe {
            let child = &**a.children.add(2);
            assert_eq!(child.null_count, 1);
        }
        release_unconsumed(&mut s, &mut a);
        assert!(s.release.is_none() && a.release.is_none());
    }

    #[test]
    fn a_primitive_array_is_made_and_released() {
        let column = Column {
            name: "v".into(),
            values: Values::F64(vec![f64::NAN, 2.0]),
            nan_is_null: true,
        };
        assert_eq!(column.null_count(), 1);
        let (mut s, mut a) = primitive_array(column);
        assert_eq!((a.length, a.null_count, a.n_children, s.n_children), (2, 1, 0, 0));
        assert_eq!(s.flags, NULLABLE);
        release_unconsumed(&mut s, &mut a);
        assert!(s.release.is_none() && a.release.is_none());
    }
}

/// The Python side (`quicsm._native.Deriver.take_arrow`), registered by `crate::python`.
#[cfg(feature = "python")]
pub(crate) mod bindings {
    use std::ffi::{c_void, CStr};

    use pyo3::exceptions::PyValueError;
    use pyo3::ffi;
    use pyo3::prelude::*;

    use super::{release_unconsumed, ArrowArray, ArrowSchema, Column, Values};

    fn export(
        py: Python<'_>,
        (schema, array): (ArrowSchema, ArrowArray),
    ) -> PyResult<(PyObject, PyObject)> {
        let schema = capsule(py, Box::into_raw(Box::new(schema)) as _, SCHEMA, drop_schema)?;
        let array = capsule(py, Box::into_raw(Box::new(array)) as _, ARRAY, drop_array)?;
        Ok((schema, array))
    }

    const SCHEMA: &CStr = c"arrow_schema";
    const ARRAY: &CStr = c"arrow_array";

    unsafe extern "C" fn drop_schema(capsule: *mut ffi::PyObject) {
        let p = ffi::PyCapsule_GetPointer(capsule, SCHEMA.as_ptr()) as *mut ArrowSchema;
        if !p.is_null() {
            let mut schema = Box::from_raw(p);
            let mut none = empty_array();
            release_unconsumed(&mut schema, &mut none);
        }
    }

    unsafe extern "C" fn drop_array(capsule: *mut ffi::PyObject) {
        let p = ffi::PyCapsule_GetPointer(capsule, ARRAY.as_ptr()) as *mut ArrowArray;
        if !p.is_null() {
            let mut array = Box::from_raw(p);
            let mut none = empty_schema();
            release_unconsumed(&mut none, &mut array);
        }
    }

    fn empty_schema() -> ArrowSchema {
        ArrowSchema {
            format: std::ptr::null(),
            name: std::ptr::null(),
            metadata: std::ptr::null(),
            flags: 0,
            n_children: 0,
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    fn empty_array() -> ArrowArray {
        ArrowArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: std::ptr::null_mut(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    fn capsule(
        py: Python<'_>,
        pointer: *mut c_void,
        name: &'static CStr,
        destructor: unsafe extern "C" fn(*mut ffi::PyObject),
    ) -> PyResult<PyObject> {
        // SAFETY: the pointer is a leaked Box the destructor takes back; the name is static
        unsafe {
            let raw = ffi::PyCapsule_New(pointer, name.as_ptr(), Some(destructor));
            Bound::from_owned_ptr_or_err(py, raw).map(Bound::unbind)
        }
    }

    /// Columns of numbers that polars takes as a frame (`pl.DataFrame(block)`): the Arrow
    /// PyCapsule interface, exported once.
    #[pyclass(module = "quicsm._native")]
    pub(crate) struct ArrowBlock {
        columns: Option<Vec<Column>>,
        /// rows in the block
        #[pyo3(get)]
        length: usize,
        /// the first column's first and last value (float64: the times), and whether it never
        /// decreases
        #[pyo3(get)]
        first: Option<f64>,
        #[pyo3(get)]
        last: Option<f64>,
        #[pyo3(get)]
        ordered: bool,
    }

    impl ArrowBlock {
        pub(crate) fn new(columns: Vec<Column>) -> ArrowBlock {
            let length = columns.first().map_or(0, |c| c.values.len());
            let (first, last, ordered) = match columns.first().map(|c| &c.values) {
                Some(Values::F64(t)) => {
                    (t.first().copied(), t.last().copied(), t.windows(2).all(|w| w[0] <= w[1]))
                }
                _ => (None, None, true),
            };
            ArrowBlock { columns: Some(columns), length, first, last, ordered }
        }
    }

    /// The blocks (taken: each is exported once) as one block, column by column; every block
    /// must have the same columns.
    #[pyfunction]
    pub(crate) fn concat_blocks(mut blocks: Vec<PyRefMut<'_, ArrowBlock>>) -> PyResult<ArrowBlock> {
        let mut out: Option<Vec<Column>> = None;
        for block in blocks.iter_mut() {
            let columns =
                block.columns.take().ok_or_else(|| PyValueError::new_err("exported already"))?;
            match out.as_mut() {
                None => out = Some(columns),
                Some(all) => {
                    if all.len() != columns.len() {
                        return Err(PyValueError::new_err("blocks of different columns"));
                    }
                    for (a, c) in all.iter_mut().zip(columns) {
                        match (&mut a.values, c.values) {
                            (Values::F64(x), Values::F64(y)) => x.extend(y),
                            (Values::U8(x), Values::U8(y)) => x.extend(y),
                            (Values::U16(x), Values::U16(y)) => x.extend(y),
                            _ => return Err(PyValueError::new_err("blocks of different columns")),
                        }
                    }
                }
            }
        }
        Ok(ArrowBlock::new(out.unwrap_or_default()))
    }

    #[pymethods]
    impl ArrowBlock {
        /// `(schema capsule, array capsule)` of a struct array of the columns; a block is
        /// exported once (its buffers are moved to the consumer).
        #[pyo3(signature = (requested_schema=None))]
        fn __arrow_c_array__(
            &mut self,
            py: Python<'_>,
            requested_schema: Option<PyObject>,
        ) -> PyResult<(PyObject, PyObject)> {
            let _ = requested_schema; // the columns' own types are the only ones offered
            let columns =
                self.columns.take().ok_or_else(|| PyValueError::new_err("exported already"))?;
            export(py, super::struct_array(columns))
        }

        /// The columns named, in that order, taken out of the block (which is then spent: its
        /// other columns are let go), each to be exported on its own ([`ArrowColumn`]); `None`
        /// for a column whose every value is null (a float64 column of NaN only). A name the
        /// block does not hold is an error.
        fn take(&mut self, names: Vec<String>) -> PyResult<Vec<Option<ArrowColumn>>> {
            let mut columns =
                self.columns.take().ok_or_else(|| PyValueError::new_err("exported already"))?;
            let mut out = Vec::with_capacity(names.len());
            for name in &names {
                let at = columns.iter().position(|c| &c.name == name).ok_or_else(|| {
                    PyValueError::new_err(format!("the block holds no column {name:?}"))
                })?;
                let column = columns.swap_remove(at);
                let length = column.values.len();
                let nulls = column.null_count();
                out.push((length == 0 || nulls < length).then_some(ArrowColumn {
                    column: Some(column),
                    length,
                    null_count: nulls,
                }));
            }
            Ok(out)
        }
    }

    /// One column of a block ([`ArrowBlock::take`]) that polars takes as a series
    /// (`pl.Series(column)`): a primitive array of its own, exported once.
    #[pyclass(module = "quicsm._native")]
    pub(crate) struct ArrowColumn {
        column: Option<Column>,
        #[pyo3(get)]
        length: usize,
        #[pyo3(get)]
        null_count: usize,
    }

    #[pymethods]
    impl ArrowColumn {
        /// `(schema capsule, array capsule)` of the column; exported once.
        #[pyo3(signature = (requested_schema=None))]
        fn __arrow_c_array__(
            &mut self,
            py: Python<'_>,
            requested_schema: Option<PyObject>,
        ) -> PyResult<(PyObject, PyObject)> {
            let _ = requested_schema; // the column's own type is the only one offered
            let column =
                self.column.take().ok_or_else(|| PyValueError::new_err("exported already"))?;
            export(py, super::primitive_array(column))
        }
    }
}
