//! Leaves (`input`, `param`, `state`) and the generators that take no source (`fill`, `arange`).

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::Flags;
use crate::op::Op;

use super::R;

impl Graph {
    /// An input tensor, written before each run.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { input: true, ..Flags::default() })
    }

    /// A parameter (weight) tensor, uploaded once.
    pub fn param(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { param: true, ..Flags::default() })
    }

    /// A state tensor (KV cache, sampler state): persists across steps and re-plans, starts at zero,
    /// may be set from outside like an input and written in place by the graph (`set_rows`).
    pub fn state(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { state: true, ..Flags::default() })
    }

    fn leaf(&mut self, name: &str, dtype: DType, shape: &[usize], flags: Flags) -> R {
        let what = if flags.param {
            "param"
        } else if flags.state {
            "state"
        } else {
            "input"
        };
        self.named(name, |g| {
            let ne = g.shape_arg(what, shape)?;
            if !ne[0].is_multiple_of(dtype.block_size()) {
                return Err(g.err(
                    what,
                    format!(
                        "{dtype} {ne}: ne[0] = {} must be a multiple of the block size {}",
                        ne[0],
                        dtype.block_size()
                    ),
                ));
            }
            let id = g.new_node(Op::Input, &[], dtype, ne)?;
            g.nodes[id.index()].flags = flags;
            Ok(id)
        })
    }

    /// A constant tensor filled with `value`.
    pub fn fill(&mut self, dtype: DType, shape: &[usize], value: f32) -> R {
        let ne = self.shape_arg("fill", shape)?;
        if dtype.is_quantized() {
            return Err(self.err("fill", format!("dtype {dtype} is quantized; fill makes f32, f16, bf16 or i32")));
        }
        if dtype == DType::I32 && (value.fract() != 0.0 || !value.is_finite()) {
            return Err(self.err("fill", format!("value {value} is not an integer, the dtype is i32")));
        }
        self.new_node(Op::Fill { value }, &[], dtype, ne)
    }

    /// `start + step * i0` along `ne[0]`, repeated for every row.
    pub fn arange(&mut self, dtype: DType, shape: &[usize], start: f32, step: f32) -> R {
        let ne = self.shape_arg("arange", shape)?;
        if !matches!(dtype, DType::F32 | DType::I32) {
            return Err(self.err("arange", format!("dtype must be f32 or i32, got {dtype}")));
        }
        if !start.is_finite() || !step.is_finite() {
            return Err(self.err("arange", format!("start {start} and step {step} must be finite")));
        }
        if dtype == DType::I32 && (start.fract() != 0.0 || step.fract() != 0.0) {
            return Err(self.err("arange", format!("start {start} and step {step} must be integers for i32")));
        }
        self.new_node(Op::Arange { start, step }, &[], dtype, ne)
    }
}
