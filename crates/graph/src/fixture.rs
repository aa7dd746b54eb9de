//! The graph fixture format: a small line-oriented text format read through the builder, so every
//! fixture is checked by the same rules as code-built graphs.
//!
//! ```text
//! # comments start with '#'; blank lines are ignored
//! input  x   f32 [4096, 8]          # input NAME DTYPE SHAPE
//! param  w1  f16 [4096, 11008]      # param NAME DTYPE SHAPE (a weight)
//! state  cache f32 [128, 64]        # state NAME DTYPE SHAPE (persists across steps)
//! h  = mul_mat(w1, x)               # NAME = OP(SOURCES..., key=value...)
//! y  = scale(h, scale=0.5)
//! kv = view(cache, ne=[128, 32], nb=[4, 512], offset=0)
//! output y                          # output NAME[, NAME...]
//! ```
//!
//! Sources are earlier names, given positionally in the order [`crate::Op`] documents; parameters
//! are `key=value` with numbers (`-inf`, `inf` allowed), words (`neox`, `desc`, `f16`) or lists
//! (`[1, 2]`). Every error names its 1-based line.

use crate::dtype::DType;
use crate::error::GraphError;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::{BinaryOp, CompareOp, RopeMode, RopeParams, SortOrder, UnaryOp};
use std::collections::HashMap;

/// Parses a fixture into a graph, naming the line of the first error.
pub fn parse(text: &str) -> Result<Graph, GraphError> {
    let mut p = Parser { g: Graph::new(), names: HashMap::new() };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        p.statement(line).map_err(|e| match e {
            GraphError::Fixture { msg, .. } => {
                GraphError::Fixture { line: i + 1, msg: format!("{msg}\n  | {}", raw.trim()) }
            }
            other => GraphError::Fixture { line: i + 1, msg: format!("{other}\n  | {}", raw.trim()) },
        })?;
    }
    Ok(p.g)
}

/// Writes `g` in the fixture format, so that [`parse`] rebuilds the same graph (every node's op,
/// parameters, sources, dtype, layout and flags; names where they are valid and unique, `_<id>`
/// otherwise). The conformance suite round-trips every case's graph through it, which keeps the
/// parser in step with [`crate::Op`].
pub fn write(g: &Graph) -> String {
    use std::fmt::Write as _;
    let mut names: Vec<String> = Vec::with_capacity(g.len());
    let mut taken = std::collections::HashSet::new();
    let mut out = String::new();
    let list = |v: &[usize]| format!("[{}]", v.iter().map(usize::to_string).collect::<Vec<_>>().join(", "));
    for (id, n) in g.nodes() {
        let name = match &n.name {
            // Generated names (`_<id>`) start with `_`; a name of the graph's own that does too is
            // replaced, so the two never collide.
            Some(s) if is_ident(s) && !taken.contains(s.as_str()) && !s.starts_with('_') => s.clone(),
            _ => format!("_{}", id.0),
        };
        taken.insert(name.clone());
        let dims = |k: usize| (0..k).map(|i| n.layout.ne[i]).collect::<Vec<usize>>();
        let ne = dims(n.layout.ne.ndims().max(1));
        if n.op == crate::Op::Input {
            let kind = if n.flags.param {
                "param"
            } else if n.flags.state {
                "state"
            } else {
                "input"
            };
            let _ = writeln!(out, "{kind} {name} {} {}", n.dtype.name(), list(&ne));
        } else {
            let mut args: Vec<String> = n.srcs.iter().map(|s| names[s.index()].clone()).collect();
            match n.op {
                crate::Op::View => {
                    // Every dimension: a view's strides of size-1 dimensions are its own.
                    let (ne, nb) = (dims(crate::MAX_DIMS), n.layout.nb.to_vec());
                    let offset = n.layout.offset - g.node(n.srcs[0]).layout.offset;
                    args.extend([format!("ne={}", list(&ne)), format!("nb={}", list(&nb)), format!("offset={offset}")]);
                }
                crate::Op::Reshape => args.push(format!("ne={}", list(&ne))),
                crate::Op::Cast => args.push(format!("dtype={}", n.dtype.name())),
                crate::Op::RandomUniform { .. } => args.push(format!("n={}", n.layout.ne[0])),
                crate::Op::Fill { .. } | crate::Op::Arange { .. } => {
                    args.extend([format!("dtype={}", n.dtype.name()), format!("shape={}", list(&ne))]);
                }
                _ => {}
            }
            args.extend(n.op.params().into_iter().map(|(k, v)| format!("{k}={v}")));
            let _ = writeln!(out, "{name} = {}({})", n.op.name(), args.join(", "));
        }
        names.push(name);
    }
    let outputs: Vec<&str> = g.outputs().iter().map(|o| names[o.index()].as_str()).collect();
    if !outputs.is_empty() {
        let _ = writeln!(out, "output {}", outputs.join(", "));
    }
    out
}

fn bad(msg: impl Into<String>) -> GraphError {
    GraphError::Fixture { line: 0, msg: msg.into() }
}

/// Splits at commas that are not inside brackets or parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

fn parse_list(s: &str) -> Result<Vec<usize>, GraphError> {
    let inner = s
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| bad(format!("expected a list like [4096, 8], got `{s}`")))?;
    split_top(inner)
        .into_iter()
        .map(|x| x.parse::<usize>().map_err(|_| bad(format!("`{x}` in `{s}` is not a non-negative integer"))))
        .collect()
}

fn parse_f32(s: &str) -> Result<f32, GraphError> {
    s.parse::<f32>().map_err(|_| bad(format!("`{s}` is not a number")))
}

fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

struct Parser {
    g: Graph,
    names: HashMap<String, NodeId>,
}

/// One call's arguments: positional sources and `key=value` parameters (each must be used once).
struct Args {
    op: String,
    srcs: Vec<NodeId>,
    kv: Vec<(String, String, bool)>,
}

impl Args {
    fn take(&mut self, key: &str) -> Option<String> {
        self.kv.iter_mut().find(|(k, _, used)| k == key && !*used).map(|(_, v, used)| {
            *used = true;
            v.clone()
        })
    }

    fn req(&mut self, key: &str) -> Result<String, GraphError> {
        self.take(key).ok_or_else(|| bad(format!("{} needs parameter `{key}=`", self.op)))
    }

    fn f32_or(&mut self, key: &str, default: f32) -> Result<f32, GraphError> {
        self.take(key).map_or(Ok(default), |v| parse_f32(&v))
    }

    fn f32_req(&mut self, key: &str) -> Result<f32, GraphError> {
        parse_f32(&self.req(key)?)
    }

    fn usize_req(&mut self, key: &str) -> Result<usize, GraphError> {
        let v = self.req(key)?;
        v.parse().map_err(|_| bad(format!("{}: `{key}={v}` is not a non-negative integer", self.op)))
    }

    fn dtype(&mut self) -> Result<DType, GraphError> {
        self.req("dtype")?.parse::<DType>().map_err(|e| bad(e.to_string()))
    }

    fn nsrc(&self, n: std::ops::RangeInclusive<usize>) -> Result<(), GraphError> {
        if !n.contains(&self.srcs.len()) {
            let want =
                if n.start() == n.end() { n.start().to_string() } else { format!("{} to {}", n.start(), n.end()) };
            return Err(bad(format!("{} takes {want} sources, got {}", self.op, self.srcs.len())));
        }
        Ok(())
    }

    fn done(&self) -> Result<(), GraphError> {
        if let Some((k, _, _)) = self.kv.iter().find(|(_, _, used)| !used) {
            return Err(bad(format!("{} has no parameter `{k}`", self.op)));
        }
        Ok(())
    }
}

impl Parser {
    fn lookup(&self, name: &str) -> Result<NodeId, GraphError> {
        self.names
            .get(name)
            .copied()
            .ok_or_else(|| bad(format!("unknown tensor `{name}` (define it on an earlier line)")))
    }

    fn define(&mut self, name: &str, id: NodeId) -> Result<(), GraphError> {
        if !is_ident(name) {
            return Err(bad(format!("`{name}` is not a valid name")));
        }
        if self.names.insert(name.to_string(), id).is_some() {
            return Err(bad(format!("`{name}` is defined twice")));
        }
        Ok(())
    }

    fn statement(&mut self, line: &str) -> Result<(), GraphError> {
        let first = line.split_whitespace().next().unwrap_or("");
        match first {
            "input" | "param" | "state" => {
                let rest = line[first.len()..].trim();
                let usage = || bad(format!("expected `{first} NAME DTYPE [SHAPE]`"));
                let (name, rest) = rest.split_once(char::is_whitespace).ok_or_else(usage)?;
                let (dtype, shape) = rest.trim_start().split_once(char::is_whitespace).ok_or_else(usage)?;
                let dtype: DType = dtype.parse().map_err(|e: crate::dtype::UnknownDType| bad(e.to_string()))?;
                let shape = parse_list(shape)?;
                if self.names.contains_key(name) {
                    return Err(bad(format!("`{name}` is defined twice")));
                }
                let id = match first {
                    "input" => self.g.input(name, dtype, &shape)?,
                    "param" => self.g.param(name, dtype, &shape)?,
                    _ => self.g.state(name, dtype, &shape)?,
                };
                self.define(name, id)
            }
            "output" => {
                let rest = line["output".len()..].trim();
                if rest.is_empty() {
                    return Err(bad("expected `output NAME[, NAME...]`"));
                }
                for name in split_top(rest) {
                    let id = self.lookup(name)?;
                    self.g.set_output(id);
                }
                Ok(())
            }
            _ => {
                let (name, call) = line
                    .split_once('=')
                    .ok_or_else(|| bad("expected `input`, `param`, `state`, `output` or `NAME = OP(...)`"))?;
                let name = name.trim();
                let call = call.trim();
                let open = call.find('(').ok_or_else(|| bad(format!("expected OP(...) after `{name} =`")))?;
                let inner = call[open + 1..].strip_suffix(')').ok_or_else(|| bad("missing closing `)`"))?;
                let op = call[..open].trim().to_string();
                let mut args = Args { op: op.clone(), srcs: vec![], kv: vec![] };
                for a in split_top(inner) {
                    if a.is_empty() {
                        return Err(bad(format!("{op}: empty argument")));
                    }
                    match a.split_once('=') {
                        Some((k, v)) => args.kv.push((k.trim().to_string(), v.trim().to_string(), false)),
                        None => {
                            if !args.kv.is_empty() {
                                return Err(bad(format!("{op}: source `{a}` after a key=value parameter")));
                            }
                            args.srcs.push(self.lookup(a)?);
                        }
                    }
                }
                if !is_ident(name) {
                    return Err(bad(format!("`{name}` is not a valid name")));
                }
                if self.names.contains_key(name) {
                    return Err(bad(format!("`{name}` is defined twice")));
                }
                self.g.pending_name = Some(name.to_string());
                let id = self.call(&mut args);
                self.g.pending_name = None;
                let id = id?;
                args.done()?;
                self.g.set_name(id, name);
                self.define(name, id)
            }
        }
    }

    fn call(&mut self, a: &mut Args) -> Result<NodeId, GraphError> {
        let g = &mut self.g;
        let s = a.srcs.clone();
        let unary = UnaryOp::ALL.into_iter().find(|u| u.name() == a.op);
        let binary = BinaryOp::ALL.into_iter().find(|b| b.name() == a.op);
        let compare = CompareOp::ALL.into_iter().find(|c| c.name() == a.op);
        if let Some(u) = unary {
            a.nsrc(1..=1)?;
            return g.unary(u, s[0]);
        }
        if let Some(b) = binary {
            a.nsrc(2..=2)?;
            return g.binary(b, s[0], s[1]);
        }
        if let Some(c) = compare {
            a.nsrc(2..=2)?;
            return g.compare(c, s[0], s[1]);
        }
        match a.op.as_str() {
            "view" => {
                a.nsrc(1..=1)?;
                let ne = parse_list(&a.req("ne")?)?;
                let nb = parse_list(&a.req("nb")?)?;
                let offset = a
                    .take("offset")
                    .map_or(Ok(0), |v| v.parse().map_err(|_| bad(format!("view: offset `{v}` is not an integer"))))?;
                g.view(s[0], &ne, &nb, offset)
            }
            "reshape" => {
                a.nsrc(1..=1)?;
                let ne = parse_list(&a.req("ne")?)?;
                g.reshape(s[0], &ne)
            }
            "permute" => {
                a.nsrc(1..=1)?;
                let axes = parse_list(&a.req("axes")?)?;
                let axes: [usize; 4] = axes
                    .try_into()
                    .map_err(|v: Vec<usize>| bad(format!("permute: axes needs 4 entries, got {}", v.len())))?;
                g.permute(s[0], axes)
            }
            "transpose" => {
                a.nsrc(1..=1)?;
                g.transpose(s[0])
            }
            "cont" => {
                a.nsrc(1..=1)?;
                g.cont(s[0])
            }
            "cast" => {
                a.nsrc(1..=1)?;
                let d = a.dtype()?;
                g.cast(s[0], d)
            }
            "scale" => {
                a.nsrc(1..=1)?;
                let (sc, b) = (a.f32_req("scale")?, a.f32_or("bias", 0.0)?);
                g.scale_bias(s[0], sc, b)
            }
            "clamp" => {
                a.nsrc(1..=1)?;
                let (lo, hi) = (a.f32_req("min")?, a.f32_req("max")?);
                g.clamp(s[0], lo, hi)
            }
            "where" => {
                a.nsrc(3..=3)?;
                g.where_(s[0], s[1], s[2])
            }
            "fill" => {
                a.nsrc(0..=0)?;
                let d = a.dtype()?;
                let shape = parse_list(&a.req("shape")?)?;
                let v = a.f32_req("value")?;
                g.fill(d, &shape, v)
            }
            "arange" => {
                a.nsrc(0..=0)?;
                let d = a.dtype()?;
                let shape = parse_list(&a.req("shape")?)?;
                let (start, step) = (a.f32_or("start", 0.0)?, a.f32_or("step", 1.0)?);
                g.arange(d, &shape, start, step)
            }
            "get_rows" => {
                a.nsrc(2..=2)?;
                g.get_rows(s[0], s[1])
            }
            "set_rows" => {
                a.nsrc(3..=3)?;
                g.set_rows(s[0], s[1], s[2])
            }
            "scatter_add" => {
                a.nsrc(3..=3)?;
                g.scatter_add(s[0], s[1], s[2])
            }
            "mul_mat" => {
                a.nsrc(2..=2)?;
                g.mul_mat(s[0], s[1])
            }
            "rms_norm" => {
                a.nsrc(1..=1)?;
                let eps = a.f32_req("eps")?;
                g.rms_norm(s[0], eps)
            }
            "rope" => {
                // a third source: the frequency factors
                a.nsrc(2..=3)?;
                let n_dims = a.usize_req("n_dims")? as u32;
                let mode = match a.take("mode").as_deref() {
                    None | Some("normal") => RopeMode::Normal,
                    Some("neox") => RopeMode::Neox,
                    Some(m) => return Err(bad(format!("rope: mode `{m}` is not normal or neox"))),
                };
                let (base, scale) = (a.f32_or("freq_base", 10000.0)?, a.f32_or("freq_scale", 1.0)?);
                let d = RopeParams::new(n_dims, mode, base, scale);
                let n_ctx_orig = match a.take("n_ctx_orig") {
                    None => d.n_ctx_orig,
                    Some(v) => v.parse().map_err(|_| bad(format!("rope: `n_ctx_orig={v}` is not a u32")))?,
                };
                let p = RopeParams {
                    ext_factor: a.f32_or("ext_factor", d.ext_factor)?,
                    attn_factor: a.f32_or("attn_factor", d.attn_factor)?,
                    beta_fast: a.f32_or("beta_fast", d.beta_fast)?,
                    beta_slow: a.f32_or("beta_slow", d.beta_slow)?,
                    n_ctx_orig,
                    ..d
                };
                g.rope_ext(s[0], s[1], s.get(2).copied(), p)
            }
            "soft_max" => {
                a.nsrc(1..=2)?;
                let scale = a.f32_or("scale", 1.0)?;
                g.soft_max(s[0], s.get(1).copied(), scale)
            }
            "sum_rows" => {
                a.nsrc(1..=1)?;
                g.sum_rows(s[0])
            }
            "max_rows" => {
                a.nsrc(1..=1)?;
                g.max_rows(s[0])
            }
            "argmax" => {
                a.nsrc(1..=1)?;
                g.argmax(s[0])
            }
            "cumsum" => {
                a.nsrc(1..=1)?;
                g.cumsum(s[0])
            }
            "argsort" => {
                a.nsrc(1..=1)?;
                let order = match a.take("order").as_deref() {
                    None | Some("asc") => SortOrder::Asc,
                    Some("desc") => SortOrder::Desc,
                    Some(o) => return Err(bad(format!("argsort: order `{o}` is not asc or desc"))),
                };
                g.argsort(s[0], order)
            }
            "top_k" => {
                a.nsrc(1..=2)?;
                let k = a.usize_req("k")?;
                let masked = match a.take("masked").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("top_k: masked `{v}` is not a bool"))),
                };
                match (s.get(1).copied(), masked) {
                    (None, false) => g.top_k(s[0], k),
                    (Some(b), true) => g.top_k_masked(s[0], b, k),
                    (None, true) => Err(bad("top_k: masked = true needs a second source (the mask)")),
                    (Some(_), false) => Err(bad("top_k: a second source (the mask) needs masked = true")),
                }
            }
            "top_p_mask" => {
                a.nsrc(2..=2)?;
                g.top_p_mask(s[0], s[1])
            }
            "penalize" => {
                a.nsrc(3..=3)?;
                g.penalize(s[0], s[1], s[2])
            }
            "token_mask" => {
                a.nsrc(2..=3)?;
                let ids = match a.take("ids").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("token_mask: ids `{v}` is not a bool"))),
                };
                match (s.get(2).copied(), ids) {
                    (None, false) => g.token_mask(s[0], s[1], None),
                    (Some(i), true) => g.token_mask(s[0], s[1], Some(i)),
                    (None, true) => Err(bad("token_mask: ids = true needs a third source")),
                    (Some(_), false) => Err(bad("token_mask: a third source (the ids) needs ids = true")),
                }
            }
            "random_uniform" => {
                a.nsrc(1..=1)?;
                let n = a.usize_req("n")?;
                let stream = a.take("stream").map_or(Ok(0), |v| {
                    v.parse::<u32>().map_err(|_| bad(format!("random_uniform: stream `{v}` is not a u32")))
                })?;
                g.random_uniform(s[0], n, stream)
            }
            "categorical" => {
                a.nsrc(2..=3)?;
                let stream = a.take("stream").map_or(Ok(0), |v| {
                    v.parse::<u32>().map_err(|_| bad(format!("categorical: stream `{v}` is not a u32")))
                })?;
                let ids = match a.take("ids").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("categorical: ids `{v}` is not a bool"))),
                };
                let (params, ids) = match (s.get(2).copied(), ids) {
                    (p, false) => (p, None),
                    (Some(i), true) => (None, Some(i)),
                    (None, true) => return Err(bad("categorical: ids = true needs a third source")),
                };
                g.categorical(s[0], s[1], params, ids, stream)
            }
            "spec_verify" => {
                a.nsrc(2..=3)?;
                let stream = a.take("stream").map_or(Ok(0), |v| {
                    v.parse::<u32>().map_err(|_| bad(format!("spec_verify: stream `{v}` is not a u32")))
                })?;
                let ids = match a.take("ids").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("spec_verify: ids `{v}` is not a bool"))),
                };
                let aux = match (s.get(2).copied(), ids) {
                    (None, false) => crate::SpecAux::None,
                    (Some(p), false) => crate::SpecAux::Params(p),
                    (Some(i), true) => crate::SpecAux::Ids(i),
                    (None, true) => return Err(bad("spec_verify: ids = true needs a third source")),
                };
                g.spec_verify(s[0], s[1], aux, stream)
            }
            "spec_verify_sampled" => {
                a.nsrc(4..=5)?;
                let stream = a.take("stream").map_or(Ok(0), |v| {
                    v.parse::<u32>().map_err(|_| bad(format!("spec_verify_sampled: stream `{v}` is not a u32")))
                })?;
                let ids = match a.take("ids").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("spec_verify_sampled: ids `{v}` is not a bool"))),
                };
                let aux = match (s.get(4).copied(), ids) {
                    (None, false) => crate::SpecAux::None,
                    (Some(p), false) => crate::SpecAux::Params(p),
                    (Some(i), true) => crate::SpecAux::Ids(i),
                    (None, true) => return Err(bad("spec_verify_sampled: ids = true needs a fifth source")),
                };
                g.spec_verify_sampled(s[0], s[1], s[2], s[3], aux, stream)
            }
            "top_k_top_p_sample" => {
                a.nsrc(3..=4)?;
                let mut t = crate::fused::TopKTopP::new(crate::fused::PostSample::None);
                t.eps = a.f32_or("eps", t.eps)?;
                let int = |v: Option<String>, key: &str, d: i64| -> Result<i64, GraphError> {
                    v.map_or(Ok(d), |v| v.parse::<i64>().map_err(|_| bad(format!("{key} `{v}` is not an integer"))))
                };
                t.ks_max = u32::try_from(int(a.take("ks_max"), "ks_max", 1024)?)
                    .map_err(|_| bad("top_k_top_p_sample: ks_max out of range"))?;
                t.top_k_guess = i32::try_from(int(a.take("top_k_guess"), "top_k_guess", 32)?)
                    .map_err(|_| bad("top_k_top_p_sample: top_k_guess out of range"))?;
                t.input_is_logits = match a.take("input_is_logits").as_deref() {
                    None | Some("true") => true,
                    Some("false") => false,
                    Some(v) => return Err(bad(format!("top_k_top_p_sample: input_is_logits `{v}` is not a bool"))),
                };
                if let Some(v) = a.take("post") {
                    t.post = crate::fused::PostSample::parse(&v).ok_or_else(|| {
                        bad(format!("top_k_top_p_sample: post `{v}` is not none, qsample or multinomial"))
                    })?;
                }
                t.output = match a.take("output").as_deref() {
                    None | Some("index") => crate::fused::FusedOutput::Index,
                    Some("logits") => crate::fused::FusedOutput::Logits,
                    Some(v) => return Err(bad(format!("top_k_top_p_sample: output `{v}` is not index or logits"))),
                };
                g.top_k_top_p_sample(s[0], s[1], s[2], s.get(3).copied(), t)
            }
            "random_sample" => {
                a.nsrc(3..=3)?;
                let index = match a.take("index") {
                    None => crate::fused::IndexDType::I32,
                    Some(v) => crate::fused::IndexDType::parse(&v)
                        .ok_or_else(|| bad(format!("random_sample: index `{v}` is not an integer dtype")))?,
                };
                let f64_rows = match a.take("f64_rows").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(bad(format!("random_sample: f64_rows `{v}` is not a bool"))),
                };
                g.random_sample(s[0], s[1], s[2], index, f64_rows)
            }
            "list_filter" => {
                a.nsrc(2..=2)?;
                let v = a.take("stages").ok_or_else(|| bad("list_filter: stages missing"))?;
                let stages = crate::ListStages::parse(&v).ok_or_else(|| {
                    bad(format!("list_filter: stages `{v}` is not 1 to 8 of top_p, min_p, temp joined by +"))
                })?;
                g.list_filter(s[0], s[1], stages)
            }
            other => Err(bad(format!("unknown op `{other}`"))),
        }
    }
}
