//! The attribute of [`crate::Op::ListFilter`]: the static sequence of list stages (top-p, min-p,
//! temperature) that one node applies to a candidate list, and the layout of their per-row
//! parameters.

use std::fmt;

/// One stage of [`crate::Op::ListFilter`]. Stage `s` of a node reads parameter rows `2 s` and
/// `2 s + 1` of each row's column ([`PARAMS_PER_STAGE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListStage {
    /// `top_p`: parameters `(p, min_keep)`.
    TopP,
    /// `min_p`: parameters `(ln p, min_keep)` (the logarithm taken by the caller, in `f32`, as the
    /// sampler chain takes it).
    MinP,
    /// `temp`: parameters `(t, unused)`.
    Temp,
}

/// Parameter rows per stage.
pub const PARAMS_PER_STAGE: usize = 2;

impl ListStage {
    /// Every stage kind.
    pub const ALL: [ListStage; 3] = [ListStage::TopP, ListStage::MinP, ListStage::Temp];

    /// The stage's name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            ListStage::TopP => "top_p",
            ListStage::MinP => "min_p",
            ListStage::Temp => "temp",
        }
    }

    /// The stage kind called `name`.
    pub fn parse(name: &str) -> Option<ListStage> {
        ListStage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// A small code for shaders (push constants): 0 top-p, 1 min-p, 2 temp.
    pub const fn code(self) -> u32 {
        match self {
            ListStage::TopP => 0,
            ListStage::MinP => 1,
            ListStage::Temp => 2,
        }
    }
}

/// The stages of one [`crate::Op::ListFilter`] node, in order: 1 to [`ListStages::MAX`] of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListStages {
    kinds: [ListStage; ListStages::MAX],
    len: u8,
}

impl ListStages {
    /// The most stages one node applies.
    pub const MAX: usize = 8;
    /// The longest list one node filters (a backend may walk a row's list in one invocation, a
    /// few passes per stage).
    pub const MAX_LEN: usize = 1024;

    /// The stages `stages`, or `None` when there are none or more than [`ListStages::MAX`].
    pub fn new(stages: &[ListStage]) -> Option<ListStages> {
        if stages.is_empty() || stages.len() > Self::MAX {
            return None;
        }
        // Unused slots hold one fixed kind, so equal sequences compare and hash equal.
        let mut kinds = [ListStage::TopP; Self::MAX];
        kinds[..stages.len()].copy_from_slice(stages);
        Some(ListStages { kinds, len: stages.len() as u8 })
    }

    /// The stages in order.
    pub fn as_slice(&self) -> &[ListStage] {
        &self.kinds[..self.len as usize]
    }

    /// How many stages.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never true ([`ListStages::new`] refuses an empty sequence); for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Parameter rows a node with these stages reads: [`PARAMS_PER_STAGE`] per stage.
    pub fn param_rows(&self) -> usize {
        PARAMS_PER_STAGE * self.len()
    }

    /// Parses the dump spelling (`top_p+min_p+temp`).
    pub fn parse(s: &str) -> Option<ListStages> {
        let kinds: Option<Vec<ListStage>> = s.split('+').map(ListStage::parse).collect();
        ListStages::new(&kinds?)
    }
}

impl fmt::Display for ListStages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            f.write_str(s.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_and_bounds() {
        let s = ListStages::new(&[ListStage::TopP, ListStage::MinP, ListStage::Temp]).unwrap();
        assert_eq!(s.to_string(), "top_p+min_p+temp");
        assert_eq!(ListStages::parse("top_p+min_p+temp"), Some(s));
        assert_eq!(s.param_rows(), 6);
        assert_eq!(ListStages::parse("top_p+typical"), None);
        assert_eq!(ListStages::new(&[]), None);
        assert_eq!(ListStages::new(&[ListStage::Temp; 9]), None);
        assert!(ListStages::new(&[ListStage::Temp; 8]).is_some());
        // Padding never makes different sequences equal.
        assert_ne!(ListStages::new(&[ListStage::TopP]), ListStages::new(&[ListStage::TopP, ListStage::TopP]));
    }
}
