//! In-process collection of per-node GPU times, for `gpu-report`'s profile section: once
//! [`enable`]d, every backend created afterwards writes a timestamp after each node, and each
//! submission hands its nodes' `(label, µs)` here when it retires; [`take`] empties the list.
//! Off by default: no timestamps, no locking.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
static TIMES: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

/// At most this many entries are kept between two [`take`]s (later ones are dropped).
const MAX_ENTRIES: usize = 1 << 20;

/// Makes every backend created from now on record per-node timestamps into this collection.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Adds one node's GPU time (its label is `"<node> <op>"`).
pub(crate) fn record(label: &str, us: f64) {
    let mut t = TIMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if t.len() < MAX_ENTRIES {
        t.push((label.to_string(), us));
    }
}

/// Every `(label, µs)` recorded since the last call, in retirement order.
pub fn take() -> Vec<(String, f64)> {
    std::mem::take(&mut *TIMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}
