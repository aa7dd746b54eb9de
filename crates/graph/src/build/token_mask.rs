//! The allowed-token masks (`token_mask`; family `token_mask`): a packed bitmask per row bans
//! every token it does not allow, on logits in vocabulary order or on a candidate list with its
//! token ids, one elementwise pass.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::Op;

use super::R;

impl Graph {
    /// Bans the tokens a packed bitmask does not allow: `x f32 [m, rows..]` (logits in vocabulary
    /// order, or with `ids` a candidate list's values), `bits i32 [w, rows..]` (bit `t % 32` of
    /// word `t / 32` allows token `t`) and the optional `ids i32 [m, rows..]` (each entry's token
    /// id); f32 `[m, rows..]`, see [`Op::TokenMask`].
    pub fn token_mask(&mut self, x: NodeId, bits: NodeId, ids: Option<NodeId>) -> R {
        const OP: &str = "token_mask";
        let nx = self.rows_src(OP, "x", x)?;
        if nx.dtype != DType::F32 {
            return Err(self.err(OP, format!("x {} must be f32", self.describe(x))));
        }
        let ne = nx.layout.ne;
        let w = self.rows_src(OP, "bits", bits)?.layout.ne[0];
        self.per_row_src(OP, "bits (32 tokens a word)", bits, DType::I32, w, x)?;
        if let Some(i) = ids {
            self.per_row_src(OP, "ids", i, DType::I32, ne[0], x)?;
        }
        let srcs: Vec<NodeId> = [x, bits].into_iter().chain(ids).collect();
        self.new_node(Op::TokenMask { ids: ids.is_some() }, &srcs, DType::F32, ne)
    }
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::graph::Graph;
    use crate::op::Op;

    fn msg<T: std::fmt::Debug>(r: Result<T, crate::error::GraphError>) -> String {
        r.expect_err("the builder must refuse").to_string()
    }

    #[test]
    fn both_forms_build_with_any_word_count() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[100, 3]).unwrap();
        let short = g.input("short", DType::I32, &[2, 3]).unwrap();
        let long = g.input("long", DType::I32, &[9, 3]).unwrap();
        let ids = g.input("ids", DType::I32, &[100, 3]).unwrap();
        let y = g.token_mask(x, short, None).unwrap();
        assert_eq!(g.node(y).op, Op::TokenMask { ids: false });
        assert_eq!((g.node(y).dtype, g.node(y).ne()), (DType::F32, [100, 3, 1, 1]));
        assert_eq!(g.node(y).srcs.as_slice(), &[x, short]);
        let z = g.token_mask(x, long, Some(ids)).unwrap();
        assert_eq!(g.node(z).op, Op::TokenMask { ids: true });
        assert_eq!(g.node(z).srcs.as_slice(), &[x, long, ids]);
        assert_eq!(g.node(z).op.to_string(), "token_mask{ids=true}");
        assert_eq!(g.node(y).op.to_string(), "token_mask");
    }

    #[test]
    fn the_fixture_format_names_the_ids_form() {
        let head = "input x f32 [40, 2]\ninput b i32 [2, 2]\ninput i i32 [40, 2]\n";
        let g =
            crate::fixture::parse(&format!("{head}y = token_mask(x, b)\nz = token_mask(x, b, i, ids=true)\n")).unwrap();
        let ops: Vec<Op> = g.nodes().map(|(_, n)| n.op).skip(3).collect();
        assert_eq!(ops, [Op::TokenMask { ids: false }, Op::TokenMask { ids: true }]);
        let e = crate::fixture::parse(&format!("{head}y = token_mask(x, b, ids=true)\n")).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("needs a third source"), "{e}");
        let e = crate::fixture::parse(&format!("{head}y = token_mask(x, b, i)\n")).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("needs ids = true"), "{e}");
    }

    #[test]
    fn errors_name_the_op_and_the_operand() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[64, 2]).unwrap();
        let h = g.input("h", DType::F16, &[64, 2]).unwrap();
        let bits = g.input("bits", DType::I32, &[2, 2]).unwrap();
        let fbits = g.input("fbits", DType::F32, &[2, 2]).unwrap();
        let rows3 = g.input("rows3", DType::I32, &[2, 3]).unwrap();
        let ids_short = g.input("ids_short", DType::I32, &[63, 2]).unwrap();
        let ids_f = g.input("ids_f", DType::F32, &[64, 2]).unwrap();
        let e = msg(g.token_mask(h, bits, None));
        assert!(e.contains("token_mask") && e.contains("x ") && e.contains("must be f32"), "{e}");
        let e = msg(g.token_mask(x, fbits, None));
        assert!(e.contains("token_mask") && e.contains("'fbits'") && e.contains("i32 [2, rows..]"), "{e}");
        let e = msg(g.token_mask(x, rows3, None));
        assert!(e.contains("token_mask") && e.contains("'rows3'") && e.contains("with the rows of"), "{e}");
        let e = msg(g.token_mask(x, bits, Some(ids_short)));
        assert!(e.contains("token_mask") && e.contains("ids") && e.contains("i32 [64, rows..]"), "{e}");
        let e = msg(g.token_mask(x, bits, Some(ids_f)));
        assert!(e.contains("token_mask") && e.contains("'ids_f'"), "{e}");
        let t = g.transpose(x).unwrap();
        let e = msg(g.token_mask(t, bits, None));
        assert!(e.contains("token_mask") && e.contains("contiguous rows"), "{e}");
    }
}
