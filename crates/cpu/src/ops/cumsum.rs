//! `cumsum`: inclusive prefix sum of each row (see `math::cumsum_f32` for the blocked scan).

use super::{K, map_rows};
use crate::error::CpuError;
use crate::math::cumsum_f32;

pub(crate) fn cumsum(k: &K<'_>) -> Result<(), CpuError> {
    map_rows(k, |_, x, y| cumsum_f32(x, y));
    Ok(())
}
