//! Parsing the header, metadata and tensor index of a GGUF file, checking every length and count
//! against the bytes that remain before allocating anything, and every tensor against the data
//! section.

use crate::error::GgufError;
use crate::tensor::{TensorInfo, dtype_of};
use crate::value::Value;
use std::collections::HashMap;

/// The default alignment of the data section and of every tensor (`general.alignment` overrides it).
pub const DEFAULT_ALIGNMENT: usize = 32;
/// Deepest nesting of arrays accepted (GGUF writers produce one level; the bound keeps the
/// recursion of the reader shallow on hostile input).
const MAX_ARRAY_DEPTH: usize = 4;
/// At most this many dimensions per tensor (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: usize = 4;

/// What parsing produces.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub keys: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub names: HashMap<String, usize>,
    pub alignment: usize,
    pub data_start: usize,
}

struct Cursor<'a> {
    file: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated {
                file: self.file.into(),
                what: what(),
                at: self.pos as u64,
                end: self.pos as u64 + n as u64,
                len: self.b.len() as u64,
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn invalid(&self, what: String, msg: String) -> GgufError {
        GgufError::Invalid { file: self.file.into(), what, msg }
    }

    /// A count that promises at least `min_each` bytes per item: checked against what remains.
    fn count(&mut self, min_each: usize, what: &dyn Fn() -> String) -> Result<usize, GgufError> {
        let at = self.pos;
        let n = self.u64(what)?;
        let need = n.checked_mul(min_each as u64);
        match need {
            Some(need) if need <= self.left() as u64 => Ok(n as usize),
            _ => Err(self.invalid(
                what(),
                format!("count {n} at byte {at} needs at least {n} x {min_each} bytes, {} remain", self.left()),
            )),
        }
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let at = self.pos;
        let n = self.count(1, what)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| self.invalid(what(), format!("the string at byte {at} is not UTF-8 ({e})")))
    }

    fn value(&mut self, ty: u32, depth: usize, what: &dyn Fn() -> String) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U8(self.array::<1>(what)?[0]),
            1 => Value::I8(self.array::<1>(what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => {
                let at = self.pos;
                match self.array::<1>(what)?[0] {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => return Err(self.invalid(what(), format!("bool byte {b} at byte {at} is not 0 or 1"))),
                }
            }
            8 => Value::Str(self.string(what)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.invalid(what(), format!("arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let et = self.u32(what)?;
                let min =
                    min_size(et).ok_or_else(|| self.invalid(what(), format!("unknown array element type {et}")))?;
                let n = self.count(min, what)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(et, depth + 1, what)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            other => return Err(self.invalid(what(), format!("unknown value type {other}"))),
        })
    }
}

/// The fewest bytes a value of type `ty` takes (`None` for an unknown type).
fn min_size(ty: u32) -> Option<usize> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,
        9 => 12,
        10..=12 => 8,
        _ => return None,
    })
}

pub(crate) fn parse(file: &str, b: &[u8]) -> Result<Parsed, GgufError> {
    if b.len() < 4 || &b[..4] != b"GGUF" {
        return Err(GgufError::BadMagic { file: file.into(), magic: b[..b.len().min(4)].to_vec() });
    }
    let mut c = Cursor { file, b, pos: 4 };
    let version = c.u32(&|| "the version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { file: file.into(), version });
    }
    // smallest tensor info: name length, n_dims, type, offset; smallest entry: key length, type, a byte
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.count(8 + 4 + 1, &|| "the metadata count".into())?;
    if n_tensors.checked_mul(8 + 4 + 4 + 8).is_none_or(|need| need > c.left() as u64) {
        return Err(c.invalid(
            "the tensor count".into(),
            format!("{n_tensors} tensors need at least {n_tensors} x 24 bytes, {} remain", c.left()),
        ));
    }
    let n_tensors = n_tensors as usize;

    let mut metadata = Vec::with_capacity(n_kv);
    let mut keys = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let key = c.string(&|| format!("the key of metadata entry {i}"))?;
        let what = || format!("metadata '{key}'");
        let ty = c.u32(&what)?;
        let v = c.value(ty, 0, &what)?;
        if keys.insert(key.clone(), metadata.len()).is_some() {
            return Err(c.invalid(what(), "the key appears twice".into()));
        }
        metadata.push((key, v));
    }
    let alignment = match keys.get("general.alignment").map(|&i| &metadata[i].1) {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if a.is_power_of_two() => *a as usize,
        Some(v) => {
            return Err(c.invalid(
                "metadata 'general.alignment'".into(),
                format!("must be a u32 power of two, is {}", v.describe()),
            ));
        }
    };

    let mut infos = Vec::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let name = c.string(&|| format!("the name of tensor {i}"))?;
        let what = || format!("tensor '{name}'");
        let bad = |msg: String| GgufError::BadTensor { file: file.into(), tensor: name.clone(), msg };
        let n_dims = c.u32(&what)? as usize;
        if !(1..=MAX_DIMS).contains(&n_dims) {
            return Err(bad(format!("{n_dims} dimensions (1 to {MAX_DIMS} allowed)")));
        }
        let mut ne = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            let n = c.u64(&what)?;
            ne.push(
                usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= i64::MAX as usize)
                    .ok_or_else(|| bad(format!("dimension {n} is too large")))?,
            );
        }
        let type_id = c.u32(&what)?;
        let offset = c.u64(&what)?;
        infos.push((name, ne, type_id, offset));
    }
    let data_start = c.pos.div_ceil(alignment) * alignment;
    if n_tensors > 0 && data_start > b.len() {
        return Err(GgufError::Truncated {
            file: file.into(),
            what: "the data section".into(),
            at: data_start as u64,
            end: data_start as u64,
            len: b.len() as u64,
        });
    }
    let data_len = b.len().saturating_sub(data_start);

    let mut tensors = Vec::with_capacity(n_tensors);
    let mut names = HashMap::with_capacity(n_tensors);
    for (name, ne, type_id, offset) in infos {
        let bad = |msg: String| GgufError::BadTensor { file: file.into(), tensor: name.clone(), msg };
        let dtype = dtype_of(type_id).map_err(|type_name| GgufError::UnknownDType {
            file: file.into(),
            tensor: name.clone(),
            type_id,
            type_name,
        })?;
        if !ne[0].is_multiple_of(dtype.block_size()) {
            return Err(bad(format!(
                "{dtype} {ne:?}: ne[0] = {} is not a multiple of the block size {}",
                ne[0],
                dtype.block_size()
            )));
        }
        let rows = ne[1..].iter().try_fold(1usize, |acc, &n| acc.checked_mul(n));
        let size = rows.and_then(|r| (ne[0] / dtype.block_size()).checked_mul(dtype.size())?.checked_mul(r));
        let size = size.ok_or_else(|| bad(format!("{dtype} {ne:?}: the byte size overflows")))?;
        if !offset.is_multiple_of(alignment as u64) {
            return Err(bad(format!("offset {offset} is not a multiple of the alignment {alignment}")));
        }
        let end = offset.checked_add(size as u64);
        if end.is_none_or(|e| e > data_len as u64) {
            return Err(bad(format!(
                "{dtype} {ne:?} takes bytes {offset}..{} of the data section, which has {data_len} (from byte {data_start})",
                offset as u128 + size as u128
            )));
        }
        if names.insert(name.clone(), tensors.len()).is_some() {
            return Err(bad("the name appears twice".into()));
        }
        tensors.push(TensorInfo { name, dtype, ne, offset: offset as usize, size });
    }
    Ok(Parsed { version, metadata, keys, tensors, names, alignment, data_start })
}
