//! Deterministic, seeded input generators. Randomness comes from `graph::philox` (keyed by a seed
//! derived from the case name and the input's position), so every run and every backend sees the same
//! bytes.

use graph::philox;
use std::fmt;
use std::sync::Arc;

/// A counter-based random stream over the words of `philox::bits(seed, 0, i)` for `i = 0, 1, ...`
/// (four words per block, used in order).
#[derive(Debug, Clone)]
pub struct Rng {
    seed: u64,
    block: u64,
    words: [u32; 4],
    used: usize,
}

impl Rng {
    /// A stream for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { seed, block: 0, words: [0; 4], used: 4 }
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.words = philox::bits(self.seed, 0, self.block);
            self.block += 1;
            self.used = 0;
        }
        self.used += 1;
        self.words[self.used - 1]
    }

    /// A uniform `f64` in `[0, 1)` with 32 random bits (finer than an f32 input can hold).
    pub fn unit(&mut self) -> f64 {
        f64::from(self.next_u32()) / 4_294_967_296.0
    }

    /// A uniform integer in `0..n` (`n > 0`), from 64 random bits.
    pub fn below(&mut self, n: u64) -> u64 {
        let x = (u64::from(self.next_u32()) << 32) | u64::from(self.next_u32());
        ((u128::from(x) * u128::from(n)) >> 64) as u64
    }
}

/// A function from the stream and an element index to a value.
pub type ValueFn = dyn Fn(&mut Rng, [usize; 4]) -> f64 + Send + Sync;

/// A value generator for one input: fills a tensor of a shape with values (rounded to the input's
/// dtype when encoded).
#[derive(Clone)]
pub enum Gen {
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
    /// Uniform integers in `lo..hi`.
    Ints(i64, i64),
    /// `levels` evenly spaced values from `lo` to `hi` inclusive, uniformly chosen: many exact ties.
    Levels(u32, f64, f64),
    /// Per row of `ne[0]` entries: distinct integers drawn from `0..n` (a random partial permutation).
    Distinct(usize),
    /// A value computed from the element index (and the stream, for mixtures).
    Fn(Arc<ValueFn>),
}

impl fmt::Debug for Gen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gen::Uniform(lo, hi) => write!(f, "uniform[{lo}, {hi})"),
            Gen::Ints(lo, hi) => write!(f, "ints {lo}..{hi}"),
            Gen::Levels(n, lo, hi) => write!(f, "{n} levels in [{lo}, {hi}]"),
            Gen::Distinct(n) => write!(f, "distinct in 0..{n}"),
            Gen::Fn(_) => f.write_str("fn"),
        }
    }
}

impl Gen {
    /// A generator from a function of the stream and the element index.
    pub fn func(f: impl Fn(&mut Rng, [usize; 4]) -> f64 + Send + Sync + 'static) -> Gen {
        Gen::Fn(Arc::new(f))
    }

    /// Uniform in `[lo, hi)`, except that element `[i0, ..]` with `i0 % every == phase` is `value`.
    pub fn with_special(lo: f64, hi: f64, every: usize, phase: usize, value: f64) -> Gen {
        Gen::func(move |rng, idx| if idx[0] % every == phase { value } else { lo + (hi - lo) * rng.unit() })
    }

    /// The values of a tensor of shape `ne`, in ggml order.
    pub fn generate(&self, rng: &mut Rng, ne: [usize; 4]) -> Vec<f64> {
        let n: usize = ne.iter().product();
        match self {
            Gen::Uniform(lo, hi) => (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect(),
            Gen::Ints(lo, hi) => (0..n).map(|_| (*lo + rng.below((hi - lo) as u64) as i64) as f64).collect(),
            Gen::Levels(levels, lo, hi) => (0..n)
                .map(|_| {
                    let k = rng.below(u64::from(*levels)) as f64;
                    lo + (hi - lo) * k / f64::from(levels - 1)
                })
                .collect(),
            Gen::Distinct(range) => {
                assert!(ne[0] <= *range, "cannot draw {} distinct values from 0..{range}", ne[0]);
                let mut out = Vec::with_capacity(n);
                for _ in 0..n / ne[0] {
                    let mut pool: Vec<usize> = (0..*range).collect();
                    for i in 0..ne[0] {
                        let j = i + rng.below((range - i) as u64) as usize;
                        pool.swap(i, j);
                        out.push(pool[i] as f64);
                    }
                }
                out
            }
            Gen::Fn(f) => crate::values::indices(ne).map(|idx| f(rng, idx)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_in_range() {
        let a = Gen::Uniform(-2.0, 3.0).generate(&mut Rng::new(5), [100, 2, 1, 1]);
        let b = Gen::Uniform(-2.0, 3.0).generate(&mut Rng::new(5), [100, 2, 1, 1]);
        let c = Gen::Uniform(-2.0, 3.0).generate(&mut Rng::new(6), [100, 2, 1, 1]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|v| (-2.0..3.0).contains(v)));
        let ints = Gen::Ints(-1, 4).generate(&mut Rng::new(1), [1000, 1, 1, 1]);
        for k in -1..4 {
            assert!(ints.contains(&(k as f64)), "{k} never drawn");
        }
        assert!(ints.iter().all(|v| (-1.0..4.0).contains(v)));
        let lv = Gen::Levels(3, 0.0, 1.0).generate(&mut Rng::new(1), [50, 1, 1, 1]);
        assert!(lv.iter().all(|v| [0.0, 0.5, 1.0].contains(v)));
    }

    #[test]
    fn distinct_rows_are_distinct() {
        let d = Gen::Distinct(10).generate(&mut Rng::new(3), [10, 3, 1, 1]);
        for row in d.chunks(10) {
            let mut r = row.to_vec();
            r.sort_by(f64::total_cmp);
            assert_eq!(r, (0..10).map(f64::from).collect::<Vec<_>>());
        }
        let s = Gen::with_special(0.0, 1.0, 4, 1, f64::NEG_INFINITY).generate(&mut Rng::new(1), [8, 1, 1, 1]);
        assert_eq!(s[1], f64::NEG_INFINITY);
        assert_eq!(s[5], f64::NEG_INFINITY);
        assert!(s[0].is_finite());
    }
}
