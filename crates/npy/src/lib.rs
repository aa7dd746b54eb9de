//! The `.npy` files of the workspace's tools (`cargo xtask sample --logits`, the fused ops' CLI):
//! [`parse`] reads one from its bytes into a [`Npy`] (shape and typed elements) or says, as an
//! [`NpyError`], what is wrong with it, never panicking on any input (a fuzz target and its corpus,
//! `fuzz/`, check that); [`write_f32`] writes a 2-D f32 array.
//!
//! Supported: format versions 1.x to 3.x, little-endian (or byte-order-free) f32, f16, f64, i32,
//! i64 and bf16 stored as two raw bytes (`|V2`, how NumPy saves ml_dtypes' bfloat16), C order (or an
//! array with at most one dimension longer than 1, whose order does not matter).
//!
//! ```
//! let bytes = npy::write_f32(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! let a = npy::parse(&bytes).unwrap();
//! assert_eq!(a.shape, [2, 3]);
//! assert_eq!(a.data.f32s().unwrap()[4], 5.0);
//! assert!(npy::parse(&bytes[..40]).unwrap_err().to_string().starts_with("truncated .npy file"));
//! ```

use npyz::{DType, TypeChar};

/// The elements of an `.npy` file, typed by its header.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// `<f4`
    F32(Vec<f32>),
    /// `<f2`
    F16(Vec<half::f16>),
    /// `|V2` (bfloat16 bits)
    BF16(Vec<half::bf16>),
    /// `<f8`
    F64(Vec<f64>),
    /// `<i4`
    I32(Vec<i32>),
    /// `<i8`
    I64(Vec<i64>),
}

impl Data {
    /// The dtype's short name (`f32`, `f16`, `bf16`, `f64`, `i32`, `i64`).
    pub fn name(&self) -> &'static str {
        match self {
            Data::F32(_) => "f32",
            Data::F16(_) => "f16",
            Data::BF16(_) => "bf16",
            Data::F64(_) => "f64",
            Data::I32(_) => "i32",
            Data::I64(_) => "i64",
        }
    }

    /// The elements.
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F16(v) => v.len(),
            Data::BF16(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// 16- and 32-bit float values widened exactly to f32 (`None` for the other dtypes).
    pub fn f32s(&self) -> Option<Vec<f32>> {
        match self {
            Data::F32(v) => Some(v.clone()),
            Data::F16(v) => Some(v.iter().map(|x| x.to_f32()).collect()),
            Data::BF16(v) => Some(v.iter().map(|x| x.to_f32()).collect()),
            _ => None,
        }
    }
}

/// An `.npy` array: its shape (C order) and elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Npy {
    /// The shape, outermost first.
    pub shape: Vec<usize>,
    /// The elements in C order.
    pub data: Data,
}

/// What is wrong with an `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    /// The magic string, version or header does not parse.
    #[error("not an .npy file: {cause}")]
    NotNpy {
        /// npyz's reason.
        cause: String,
    },
    /// The file ends inside its header.
    #[error("truncated .npy file: its header is {header} bytes long, but the file has {len} bytes")]
    TruncatedHeader {
        /// Bytes of the magic string, version, length field and header.
        header: usize,
        /// Bytes of the file.
        len: usize,
    },
    /// The file ends before the elements its header declares.
    #[error(
        "truncated .npy file: its header declares shape {shape:?} of {dtype}, {expected} bytes with the header, \
         but the file has {len} bytes"
    )]
    TruncatedData {
        /// The declared shape.
        shape: Vec<usize>,
        /// The declared dtype, as in the header.
        dtype: String,
        /// The bytes the header and the elements need.
        expected: usize,
        /// Bytes of the file.
        len: usize,
    },
    /// Fortran order with more than one dimension longer than 1.
    #[error("Fortran-order arrays are not supported; save in C order")]
    FortranOrder,
    /// A record dtype.
    #[error("structured dtypes are not supported")]
    Structured,
    /// Big-endian elements wider than a byte.
    #[error("big-endian data is not supported")]
    BigEndian,
    /// Any other dtype.
    #[error("unsupported dtype {dtype} (expected f32, f16, f64, i32, i64 or bf16 stored as |V2)")]
    Unsupported {
        /// The dtype, as in the header.
        dtype: String,
    },
    /// The element count overflows (a header declaring an absurd shape).
    #[error("the header's shape {shape:?} has more elements than memory can address")]
    TooLarge {
        /// The declared shape.
        shape: Vec<u64>,
    },
    /// npyz failed reading the elements.
    #[error("reading the elements: {cause}")]
    Elements {
        /// npyz's reason.
        cause: String,
    },
}

/// Byte offset of an `.npy` file's elements: the magic string and version (8 bytes), the header
/// length (2 bytes little-endian in format 1.x, 4 in 2.x and 3.x) and the header. `None` when the
/// file does not start like an `.npy` file or is too short to say.
pub fn data_offset(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 12 || &bytes[..6] != b"\x93NUMPY" {
        return None;
    }
    Some(if bytes[6] == 1 {
        10 + usize::from(u16::from_le_bytes([bytes[8], bytes[9]]))
    } else {
        12 + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    })
}

/// The header text: after the magic string, version and length field (10 bytes in format 1.x, 12
/// in 2.x and 3.x), up to the elements.
fn header(bytes: &[u8]) -> Option<&[u8]> {
    let start = if bytes.get(6) == Some(&1) { 10 } else { 12 };
    bytes.get(start..data_offset(bytes)?)
}

/// The deepest bracket nesting a header may have (a NumPy header has at most four).
const MAX_HEADER_DEPTH: usize = 8;

/// The deepest nesting of `(`, `[` and `{` in the header (brackets inside quotes counted too: a
/// real header has none there).
fn header_depth(bytes: &[u8]) -> Option<usize> {
    let (mut depth, mut max) = (0usize, 0usize);
    for &b in header(bytes)? {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Some(max)
}

/// The dimensions of the header's `'shape': (...)` tuple, where it reads as one (`None` leaves the
/// header to npyz).
fn declared_shape(bytes: &[u8]) -> Option<Vec<u64>> {
    let header = std::str::from_utf8(header(bytes)?).ok()?;
    let at = header.find("'shape'").or_else(|| header.find("\"shape\""))?;
    let rest = &header[at..];
    let open = rest.find('(')?;
    let close = rest[open..].find(')')? + open;
    rest[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.trim_end_matches(['L', 'l']).parse::<u64>().ok())
        .collect()
}

/// Reads an `.npy` file from its bytes (see the crate documentation for what is supported).
pub fn parse(bytes: &[u8]) -> Result<Npy, NpyError> {
    if let Some(header) = data_offset(bytes).filter(|&h| bytes.len() < h) {
        return Err(NpyError::TruncatedHeader { header, len: bytes.len() });
    }
    // npyz's header parser takes exponential time on deeply nested brackets (a fuzzer's 443-byte
    // header ran for over 10 s): a NumPy header is a flat dict whose values nest a few levels at
    // most (a shape tuple; a structured dtype's list of tuples).
    if let Some(depth) = header_depth(bytes)
        && depth > MAX_HEADER_DEPTH
    {
        return Err(NpyError::NotNpy { cause: format!("its header nests {depth} levels of brackets") });
    }
    // npyz multiplies the shape's dimensions unchecked (a panic in a debug build, a wrapped count in
    // a release one): an absurd shape is refused before it reads the header.
    if let Some(shape) = declared_shape(bytes)
        && shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).is_none()
    {
        return Err(NpyError::TooLarge { shape });
    }
    let npy = npyz::NpyFile::new(bytes).map_err(|e| NpyError::NotNpy { cause: e.to_string() })?;
    let shape64 = npy.shape().to_vec();
    let too_large = || NpyError::TooLarge { shape: shape64.clone() };
    let shape: Vec<usize> =
        shape64.iter().map(|&d| usize::try_from(d).map_err(|_| too_large())).collect::<Result<_, _>>()?;
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(too_large)?;
    if shape.iter().filter(|&&d| d > 1).count() > 1 && npy.order() != npyz::Order::C {
        return Err(NpyError::FortranOrder);
    }
    let DType::Plain(ts) = npy.dtype() else { return Err(NpyError::Structured) };
    let expected = n
        .checked_mul(ts.size_field() as usize)
        .and_then(|b| b.checked_add(data_offset(bytes).unwrap_or(0)))
        .ok_or_else(too_large)?;
    if bytes.len() < expected {
        return Err(NpyError::TruncatedData { shape, dtype: ts.to_string(), expected, len: bytes.len() });
    }
    if ts.endianness() == npyz::Endianness::Big && ts.size_field() > 1 {
        return Err(NpyError::BigEndian);
    }
    let elements = |e: std::io::Error| NpyError::Elements { cause: e.to_string() };
    let data = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 4) => Data::F32(npy.into_vec::<f32>().map_err(elements)?),
        (TypeChar::Float, 2) => Data::F16(npy.into_vec::<half::f16>().map_err(elements)?),
        (TypeChar::Float, 8) => Data::F64(npy.into_vec::<f64>().map_err(elements)?),
        (TypeChar::Int, 4) => Data::I32(npy.into_vec::<i32>().map_err(elements)?),
        (TypeChar::Int, 8) => Data::I64(npy.into_vec::<i64>().map_err(elements)?),
        (TypeChar::RawData, 2) => Data::BF16(
            npy.into_vec::<npyz::FixedSizeBytes<2>>()
                .map_err(elements)?
                .into_iter()
                .map(|b| half::bf16::from_bits(u16::from_le_bytes(b.0)))
                .collect(),
        ),
        _ => return Err(NpyError::Unsupported { dtype: ts.to_string() }),
    };
    Ok(Npy { shape, data })
}

/// A 2-D f32 array `[rows, cols]` as a version 1.0 `.npy` file (`'<f4'`, C order).
pub fn write_f32(rows: usize, cols: usize, vals: &[f32]) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * vals.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_of_a_file_is_an_error_not_a_panic() {
        let bytes = write_f32(3, 5, &[0.5; 15]);
        for end in 0..bytes.len() {
            assert!(parse(&bytes[..end]).is_err(), "prefix of {end} bytes");
        }
        assert_eq!(parse(&bytes).unwrap().data, Data::F32(vec![0.5; 15]));
    }

    #[test]
    fn a_deeply_nested_header_is_refused_at_once() {
        // the fuzzer's find: npyz took over 10 s on a 443-byte header of nested braces
        let header = format!("{{'descr': '<f4', 'x': {}{}, 'shape': (2,), }}", "{".repeat(40), "}".repeat(40));
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        let t = std::time::Instant::now();
        assert!(parse(&b).unwrap_err().to_string().contains("nests 41 levels"), "{:?}", parse(&b));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn an_absurd_shape_is_an_error() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        assert!(matches!(parse(&b), Err(NpyError::TooLarge { .. })), "{:?}", parse(&b));
    }
}
