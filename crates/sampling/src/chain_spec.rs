//! The SPEC string of `cargo xtask sample --chain` (design brief): stages separated by `;`, each
//! `name` or `name(key=value,...)`, with llama.cpp's sampler names and parameter meanings.
//!
//! | stage | parameters (defaults: llama.cpp's `common_params_sampling`) |
//! |---|---|
//! | `greedy` | |
//! | `dist` | `seed` |
//! | `top_k` | `k=40` |
//! | `top_p` | `p=0.95`, `min_keep=0`, `approx_k=0` (exact; `N`: the nucleus cut inside the `N` largest logits, top-p approximated by top-k) |
//! | `min_p` | `p=0.05`, `min_keep=0` |
//! | `typical` | `p=1.0`, `min_keep=0` |
//! | `tail_free` | `z=1.0` (disabled), `min_keep=0` (older llama.cpp's `tfs_z`, `llama_sample_tail_free`) |
//! | `softmax` | (none: sorts a list and fills `p`, `llama_sampler_init_softmax`) |
//! | `temp` | `t=0.8` |
//! | `temp_ext` | `t=0.8`, `delta=0.0`, `exponent=1.0` |
//! | `xtc` | `p=0.0`, `t=0.1`, `min_keep=0`, `seed` |
//! | `top_n_sigma` | `n=-1.0` |
//! | `mirostat` | `tau=5.0`, `eta=0.1`, `m=100`, `seed` |
//! | `mirostat_v2` | `tau=5.0`, `eta=0.1`, `seed` |
//! | `penalties` | `last_n=64`, `repeat=1.0`, `freq=0.0`, `present=0.0` |
//! | `dry` | `multiplier=0.0`, `base=1.75`, `allowed_length=2`, `last_n=-1`, `n_ctx=4096`, `breakers=` (token ids `13\|198 271`, or strings `"\n\|:\|\"\|*"`) |
//! | `logit_bias` | `TOKEN=BIAS`, any number (`-inf` bans; a negative TOKEN is ignored) |
//! | `adaptive_p` | `target=-1.0` (disabled), `decay=0.9`, `seed` |
//! | `allowed_tokens` | `ids=` (token ids, required: only these) |
//! | `bad_words` | `words=` (token sequences, `1 2\|3`: each one's last token banned where the history ends with the rest) |
//! | `min_tokens` | `n=0`, `eos=` (required: banned until `n` tokens were accepted) |
//! | `ignore_eos` | `eos=` (required: always banned) |
//! | `grammar` | `file=` (a GBNF grammar, required), `root=root`, `mode=first` (or `optimistic`) |
//! | `json_schema` | `file=` (a JSON schema, required), `mode=first` |
//! | `grammar_lazy` | `file=`, `triggers=` (both required), `root=root`, `mode=first` |
//! | `reasoning_budget` | `budget=-1` (unlimited), `start=`, `end=` (token sequences, both required), `forced=` (token ids; default the first end sequence), `state=idle` (or `counting`: the prompt opened a block) |
//!
//! The grammar stages need the vocabulary's token texts ([`SpecContext::vocab`]); their grammars
//! come from files so that no grammar text has to survive the SPEC's own syntax. A `triggers=`
//! file holds one trigger a line: `token:ID`, `word:TEXT` (anywhere in the output),
//! `pattern:REGEX` (anywhere) or `pattern_full:REGEX` (the whole output from its start).
//!
//! Names may also be written with `-` (llama.cpp's spelling: `top-k`, `min-p`, ...). A missing
//! `seed` is the default seed given to [`parse`] ([`crate::DEFAULT_SEED`] unless overridden).
//! DRY's `breakers`, `bad_words`' `words` and `reasoning_budget`'s `start` and `end` are token
//! sequences separated by `|`, tokens within one by spaces: `dry(multiplier=0.8,breakers=13|198
//! 271)`; `ids`, `eos` and `forced` are token ids
//! separated by spaces. Errors name the stage (index and name) and the
//! parameter.
//!
//! A value in double quotes is strings separated by `|`: `dry(breakers="\n|:|\"|*")` (llama.cpp's
//! default DRY breakers). Inside the quotes `;`, `,` and `)` are text, and a backslash escapes
//! `\|`, `\\`, `\"`, `\;`, `\,`, `\)` (each itself) and `\n` (a newline); any other escape, a
//! `\` at the end, a missing closing quote or text after it is an error. Only DRY's `breakers`
//! takes strings: they become token sequences over the vocabulary as llama.cpp's DRY makes them
//! (`crate::samplers::dry_breakers`), which needs [`SpecContext::vocab`] and
//! [`SpecContext::tokenizer`]; the unquoted form stays token ids.

use crate::chain::Chain;
use crate::error::{Result, SamplingError};
use crate::sampler::Sampler;
use crate::samplers::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a SPEC is parsed with: the seed of random stages without `seed=`, and, for the grammar
/// stages, the vocabulary. Grammar stages parsed with one context (and its clones) over the same
/// grammar share one matcher engine: the grammar states and masks one sequence met are cached
/// for the others (a batch, a server's requests with one schema). DRY's string breakers need the
/// vocabulary and the tokenizer; their token sequences are cached per context (and its clones)
/// too, so a context serves one vocabulary.
#[derive(Debug, Clone, Default)]
pub struct SpecContext {
    /// The seed random stages without `seed=` get.
    pub default_seed: u64,
    /// The token texts and end-of-generation tokens (grammar stages and DRY's string breakers
    /// need them).
    pub vocab: Option<Arc<::grammar::Vocab>>,
    /// The model's tokenizer as DRY's string breakers need it (with [`SpecContext::vocab`]).
    pub tokenizer: Option<crate::samplers::dry_breakers::BreakerTokenizer>,
    /// DRY's string breakers turned into token sequences so far, by their strings.
    pub breakers: BreakerCache,
    /// The matchers made so far, by stage name, grammar text, root and triggers.
    pub matchers: MatcherCache,
}

/// DRY's string breakers as token sequences, by the strings (a vocabulary scan each; a server
/// sees the same few lists again and again). At most [`BreakerCache::MAX`] lists are kept (then
/// the cache starts over).
#[derive(Debug, Clone, Default)]
pub struct BreakerCache(Arc<std::sync::Mutex<BreakerMap>>);

/// Breaker strings to their token sequences.
type BreakerMap = std::collections::HashMap<Vec<String>, Vec<Vec<u32>>>;

impl BreakerCache {
    /// The most breaker lists kept.
    pub const MAX: usize = 64;

    fn get(&self, key: &[String], make: impl FnOnce() -> Result<Vec<Vec<u32>>>) -> Result<Vec<Vec<u32>>> {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = map.get(key) {
            return Ok(v.clone());
        }
        let v = make()?;
        if map.len() >= Self::MAX {
            map.clear();
        }
        map.insert(key.to_vec(), v.clone());
        Ok(v)
    }
}

/// Matchers at their start, one per grammar, whose clones share their engine's cache.
#[derive(Debug, Clone, Default)]
pub struct MatcherCache(Arc<std::sync::Mutex<std::collections::HashMap<[String; 4], ::grammar::Matcher>>>);

impl MatcherCache {
    /// A matcher at the start of the grammar `key` names, made by `make` the first time.
    fn get(&self, key: [String; 4], make: impl FnOnce() -> Result<::grammar::Matcher>) -> Result<::grammar::Matcher> {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = map.get(&key) {
            return Ok(m.clone());
        }
        let m = make()?;
        map.insert(key, m.clone());
        Ok(m)
    }
}

/// A parameter's value: as written (unquoted: numbers, token ids, file names), or a quoted
/// value's `|`-separated parts with their escapes resolved.
#[derive(Debug, Clone, PartialEq)]
enum Value<'s> {
    Plain(&'s str),
    Quoted(Vec<String>),
}

struct Stage<'s> {
    index: usize,
    name: String,
    params: BTreeMap<&'s str, Value<'s>>,
    order: Vec<(&'s str, Value<'s>)>,
}

impl<'s> Stage<'s> {
    fn err(&self, message: impl Into<String>) -> SamplingError {
        SamplingError::Spec { stage_index: self.index, stage: self.name.clone(), message: message.into() }
    }

    fn allow(&self, keys: &[&str]) -> Result<()> {
        for k in self.params.keys() {
            if !keys.contains(k) {
                return Err(self.err(format!(
                    "unknown parameter `{k}` (expected {})",
                    if keys.is_empty() { "none".to_string() } else { keys.join(", ") }
                )));
            }
        }
        Ok(())
    }

    /// The unquoted value of `key` (`None` where absent); a quoted one is an error.
    fn plain(&self, key: &str) -> Result<Option<&'s str>> {
        match self.params.get(key) {
            None => Ok(None),
            Some(Value::Plain(v)) => Ok(Some(v)),
            Some(Value::Quoted(_)) => Err(self.err(format!("parameter `{key}`: takes no quoted string"))),
        }
    }

    fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T> {
        match self.plain(key)? {
            None => Ok(default),
            Some(v) => v.parse::<T>().map_err(|_| {
                self.err(format!("parameter `{key}`: cannot parse `{v}` as {}", std::any::type_name::<T>()))
            }),
        }
    }

    fn wrap<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.err(e.to_string()))
    }
}

/// The byte offsets of each `sep` in `text` outside double quotes (inside them a `\` escapes the
/// next character, so `\"` does not close them), and whether `text` ends inside them.
fn scan_quotes(text: &str, sep: Option<char>) -> (Vec<usize>, bool) {
    let (mut cuts, mut quoted, mut escaped) = (Vec::new(), false, false);
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quoted {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if Some(c) == sep && !quoted {
            cuts.push(i);
        }
    }
    (cuts, quoted)
}

/// `text` split at each `sep` outside double quotes ([`scan_quotes`]).
fn split_unquoted(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for i in scan_quotes(text, Some(sep)).0 {
        parts.push(&text[start..i]);
        start = i + sep.len_utf8();
    }
    parts.push(&text[start..]);
    parts
}

/// Whether `text` ends inside double quotes ([`scan_quotes`]).
fn ends_quoted(text: &str) -> bool {
    scan_quotes(text, None).1
}

/// The escapes of a quoted value, as written after the `\`, and the character each stands for.
const ESCAPES: [(char, char); 7] =
    [('|', '|'), ('\\', '\\'), ('"', '"'), (';', ';'), (',', ','), (')', ')'), ('n', '\n')];

/// `strings` as a quoted SPEC value (`"a|b"`) that reads back as exactly these strings: `\`, `|`
/// and `"` escaped, a newline written `\n`.
pub fn quote<S: AsRef<str>>(strings: &[S]) -> String {
    let mut out = String::from("\"");
    for (i, s) in strings.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for c in s.as_ref().chars() {
            match c {
                '\\' | '|' | '"' => {
                    out.push('\\');
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    }
    out.push('"');
    out
}

/// The value `v` of parameter `key`: quoted (`"a|b\|c"`: the parts `a` and `b|c`) or plain. An
/// unterminated quote or escape, an unknown escape, text after the closing quote or a quote
/// that does not open the value is an error (its message, naming the parameter).
fn parse_value<'s>(key: &str, v: &'s str) -> std::result::Result<Value<'s>, String> {
    let Some(body) = v.strip_prefix('"') else {
        if v.contains('"') {
            return Err(format!("parameter `{key}`: a quote may only enclose the whole value (`{key}=\"...\"`)"));
        }
        return Ok(Value::Plain(v));
    };
    let mut parts = vec![String::new()];
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        let part = parts.last_mut().expect("one part at least");
        match c {
            '\\' => match chars.next() {
                None => return Err(format!("parameter `{key}`: unterminated escape (a `\\` ends the value)")),
                Some((_, e)) => match ESCAPES.iter().find(|x| x.0 == e) {
                    Some(&(_, ch)) => part.push(ch),
                    None => {
                        return Err(format!(
                            "parameter `{key}`: unknown escape `\\{e}` (known: \\| \\\\ \\\" \\; \\, \\) \\n)"
                        ));
                    }
                },
            },
            '"' => {
                let rest = &body[i + 1..];
                if !rest.is_empty() {
                    return Err(format!("parameter `{key}`: `{rest}` after the closing quote"));
                }
                return Ok(Value::Quoted(parts));
            }
            '|' => parts.push(String::new()),
            c => part.push(c),
        }
    }
    Err(format!("parameter `{key}`: unterminated quote (no `\"` closes the value)"))
}

fn split_stage(index: usize, text: &str) -> Result<Stage<'_>> {
    let text = text.trim();
    let err = |m: String| SamplingError::Spec { stage_index: index, stage: text.to_string(), message: m };
    let (name, args) = match text.find('(') {
        None => (text, None),
        Some(open) => {
            let rest = &text[open + 1..];
            let args = match rest.strip_suffix(')') {
                Some(args) if !ends_quoted(args) => args,
                // An unterminated quote: reported below with its parameter.
                _ if ends_quoted(rest) => rest,
                _ => return Err(err("missing `)` at the end of the stage".into())),
            };
            (text[..open].trim(), Some(args))
        }
    };
    if name.is_empty() {
        return Err(err("empty stage name".into()));
    }
    let name = name.replace('-', "_");
    let mut params = BTreeMap::new();
    let mut order = Vec::new();
    if let Some(args) = args {
        for kv in split_unquoted(args, ',').into_iter().map(str::trim).filter(|s| !s.is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(err(format!("parameter `{kv}` is not `key=value`")));
            };
            let (k, v) = (k.trim(), v.trim());
            let v = parse_value(k, v).map_err(|m| SamplingError::Spec {
                stage_index: index,
                stage: name.clone(),
                message: m,
            })?;
            if params.insert(k, v.clone()).is_some() {
                return Err(err(format!("parameter `{k}` given twice")));
            }
            order.push((k, v));
        }
    }
    Ok(Stage { index, name, params, order })
}

fn parse_f32(st: &Stage<'_>, key: &str, v: &str) -> Result<f32> {
    match v {
        "-inf" => Ok(f32::NEG_INFINITY),
        "inf" | "+inf" => Ok(f32::INFINITY),
        _ => v.parse::<f32>().map_err(|_| st.err(format!("parameter `{key}`: cannot parse `{v}` as a number"))),
    }
}

/// The token sequences of parameter `key`: separated by `|`, token ids within one by spaces
/// (`13|198 271`); none where the parameter is absent.
fn token_seqs(st: &Stage<'_>, key: &str) -> Result<Vec<Vec<u32>>> {
    let Some(v) = st.params.get(key) else { return Ok(Vec::new()) };
    let Value::Plain(v) = v else {
        return Err(st.err(format!("parameter `{key}`: takes token ids (`1 2|3`), not a quoted string")));
    };
    v.split('|')
        .map(|seq| {
            seq.split_whitespace()
                .map(str::parse::<u32>)
                .collect::<std::result::Result<Vec<u32>, _>>()
                .map_err(|_| st.err(format!("parameter `{key}`: `{seq}` is not a list of token ids")))
        })
        .collect()
}

/// top_p's `approx_k`: a non-negative integer, 0 (exact top-p) where absent; anything else (a
/// negative number, a fraction, text) is an invalid parameter.
fn approx_k(st: &Stage<'_>) -> Result<usize> {
    let Some(v) = st.plain("approx_k")? else { return Ok(0) };
    st.wrap(v.parse::<usize>().map_err(|_| {
        crate::error::invalid(
            "top_p",
            "approx_k",
            v,
            "must be a non-negative integer: how many of the largest logits the nucleus is cut inside (0: exact top-p)",
        )
    }))
}

/// DRY's `breakers`: token sequences where unquoted ([`token_seqs`]); where quoted, strings
/// turned into token sequences over the vocabulary as llama.cpp does
/// ([`crate::samplers::dry_breakers`], cached in [`SpecContext::breakers`]), which needs
/// [`SpecContext::vocab`] and [`SpecContext::tokenizer`].
fn dry_breakers(st: &Stage<'_>, cx: &SpecContext) -> Result<Vec<Vec<u32>>> {
    let Some(Value::Quoted(strings)) = st.params.get("breakers") else { return token_seqs(st, "breakers") };
    let (Some(vocab), Some(tok)) = (cx.vocab.as_ref(), cx.tokenizer.as_ref()) else {
        return Err(st.err(
            "parameter `breakers`: string breakers need the model's vocabulary and tokenizer (give the model: `--vocab MODEL.gguf` in `xtask sample`), or give token ids (`breakers=13|198 271`)",
        ));
    };
    cx.breakers.get(strings, || {
        let bytes: Vec<&[u8]> = strings.iter().map(|s| s.as_bytes()).collect();
        let entries = crate::samplers::dry_breakers::from_vocab(&bytes, vocab, tok).map_err(|e| match e {
            crate::samplers::dry_breakers::BreakerError::NeedsTokenizer(b) => {
                st.err(format!("parameter `breakers`: `{}` needs the model's tokenizer", String::from_utf8_lossy(&b)))
            }
        })?;
        Ok(entries
            .into_iter()
            .map(|(head, tail)| {
                let mut seq = Vec::with_capacity(1 + tail.len());
                seq.push(head);
                seq.extend(tail);
                seq
            })
            .collect())
    })
}

fn read_file(st: &Stage<'_>, key: &str) -> Result<String> {
    let path = st.plain(key)?.ok_or_else(|| st.err(format!("parameter `{key}` (a file) is required")))?;
    std::fs::read_to_string(path).map_err(|e| st.err(format!("parameter `{key}`: cannot read `{path}`: {e}")))
}

fn parse_triggers(st: &Stage<'_>, text: &str) -> Result<Vec<::grammar::Trigger>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = || {
            st.err(format!(
                "triggers line {}: `{line}` is not `token:ID`, `word:TEXT`, `pattern:REGEX` or `pattern_full:REGEX`",
                i + 1
            ))
        };
        let (kind, value) = line.split_once(':').ok_or_else(bad)?;
        out.push(match kind.trim() {
            "token" => ::grammar::Trigger::Token(value.trim().parse().map_err(|_| bad())?),
            "word" => ::grammar::Trigger::Word(value.to_string()),
            "pattern" => ::grammar::Trigger::Pattern(value.to_string()),
            "pattern_full" => ::grammar::Trigger::PatternFull(value.to_string()),
            _ => return Err(bad()),
        });
    }
    Ok(out)
}

/// A grammar stage (`grammar`, `json_schema`, `grammar_lazy`).
fn grammar_stage(st: &Stage<'_>, name: &'static str, cx: &SpecContext) -> Result<GrammarStage> {
    let vocab = cx.vocab.as_ref().ok_or_else(|| {
        st.err("a grammar needs the vocabulary's token texts: give the model (`--vocab MODEL.gguf` in `xtask sample`)")
    })?;
    let mode = match st.plain("mode")?.unwrap_or("first") {
        "first" => GrammarMode::First,
        "optimistic" => GrammarMode::Optimistic,
        m => return Err(st.err(format!("parameter `mode`: `{m}` is not `first` or `optimistic`"))),
    };
    let text = read_file(st, "file")?;
    let gerr = |e: ::grammar::GrammarError| st.err(e.to_string());
    let text =
        if name == "json_schema" { schema::to_grammar_str(&text).map_err(|e| st.err(e.to_string()))? } else { text };
    let root = st.plain("root")?.unwrap_or("root");
    let triggers = if name == "grammar_lazy" { read_file(st, "triggers")? } else { String::new() };
    let key = [name.to_string(), text.clone(), root.to_string(), triggers.clone()];
    let matcher = cx.matchers.get(key, || {
        let g = ::grammar::Grammar::with_vocab(&text, root, vocab.as_ref()).map_err(gerr)?;
        Ok(if name == "grammar_lazy" {
            ::grammar::Matcher::lazy(&g, Arc::clone(vocab), &parse_triggers(st, &triggers)?).map_err(gerr)?
        } else {
            ::grammar::Matcher::new(&g, Arc::clone(vocab))
        })
    })?;
    Ok(GrammarStage::new(name, matcher, mode))
}

/// Parses one stage into a sampler.
fn build(st: &Stage<'_>, cx: &SpecContext) -> Result<Box<dyn Sampler>> {
    let default_seed = cx.default_seed;
    let seed = || st.get::<u64>("seed", default_seed);
    let s: Box<dyn Sampler> = match st.name.as_str() {
        "greedy" => {
            st.allow(&[])?;
            Box::new(Greedy::new())
        }
        "dist" => {
            st.allow(&["seed"])?;
            Box::new(Dist::new(seed()?))
        }
        "top_k" => {
            st.allow(&["k"])?;
            Box::new(TopK::new(st.get("k", 40)?))
        }
        "top_p" => {
            st.allow(&["p", "min_keep", "approx_k"])?;
            let approx_k = approx_k(st)?;
            Box::new(st.wrap(TopP::new(st.get("p", 0.95)?, st.get("min_keep", 0)?))?.with_approx_k(approx_k))
        }
        "min_p" => {
            st.allow(&["p", "min_keep"])?;
            Box::new(st.wrap(MinP::new(st.get("p", 0.05)?, st.get("min_keep", 0)?))?)
        }
        "typical" | "typical_p" => {
            st.allow(&["p", "min_keep"])?;
            Box::new(st.wrap(Typical::new(st.get("p", 1.0)?, st.get("min_keep", 0)?))?)
        }
        "tail_free" | "tfs_z" => {
            st.allow(&["z", "min_keep"])?;
            Box::new(st.wrap(TailFree::new(st.get("z", 1.0)?, st.get("min_keep", 0)?))?)
        }
        "softmax" => {
            st.allow(&[])?;
            Box::new(Softmax::new())
        }
        "temp" | "temperature" => {
            st.allow(&["t"])?;
            Box::new(st.wrap(Temp::new(st.get("t", 0.8)?))?)
        }
        "temp_ext" => {
            st.allow(&["t", "delta", "exponent"])?;
            Box::new(st.wrap(TempExt::new(st.get("t", 0.8)?, st.get("delta", 0.0)?, st.get("exponent", 1.0)?))?)
        }
        "xtc" => {
            st.allow(&["p", "t", "min_keep", "seed"])?;
            Box::new(st.wrap(Xtc::new(st.get("p", 0.0)?, st.get("t", 0.1)?, st.get("min_keep", 0)?, seed()?))?)
        }
        "top_n_sigma" => {
            st.allow(&["n"])?;
            Box::new(st.wrap(TopNSigma::new(st.get("n", -1.0)?))?)
        }
        "mirostat" => {
            st.allow(&["tau", "eta", "m", "seed"])?;
            Box::new(st.wrap(Mirostat::new(seed()?, st.get("tau", 5.0)?, st.get("eta", 0.1)?, st.get("m", 100)?))?)
        }
        "mirostat_v2" => {
            st.allow(&["tau", "eta", "seed"])?;
            Box::new(st.wrap(MirostatV2::new(seed()?, st.get("tau", 5.0)?, st.get("eta", 0.1)?))?)
        }
        "penalties" => {
            st.allow(&["last_n", "repeat", "freq", "present"])?;
            Box::new(st.wrap(Penalties::new(
                st.get("last_n", 64)?,
                st.get("repeat", 1.0)?,
                st.get("freq", 0.0)?,
                st.get("present", 0.0)?,
            ))?)
        }
        "dry" => {
            st.allow(&["multiplier", "base", "allowed_length", "last_n", "n_ctx", "breakers"])?;
            let breakers = dry_breakers(st, cx)?;
            Box::new(st.wrap(Dry::new(
                st.get("multiplier", 0.0)?,
                st.get("base", 1.75)?,
                st.get("allowed_length", 2)?,
                st.get("last_n", -1)?,
                st.get("n_ctx", 4096)?,
                breakers,
            ))?)
        }
        "logit_bias" => {
            let mut biases = Vec::new();
            for (k, v) in &st.order {
                let k = *k;
                let Value::Plain(v) = *v else {
                    return Err(st.err(format!("parameter `{k}`: takes a number, not a quoted string")));
                };
                // llama.cpp's llama_token is an int32_t; a negative one matches no candidate and
                // is ignored there, so it is dropped here.
                let tok = k
                    .parse::<i32>()
                    .map_err(|_| st.err(format!("parameter `{k}`: expected a token id (TOKEN=BIAS)")))?;
                let bias = parse_f32(st, k, v)?;
                st.wrap(crate::samplers::logit_bias::check_bias(i64::from(tok), bias))?;
                if let Ok(tok) = u32::try_from(tok) {
                    biases.push((tok, bias));
                }
            }
            Box::new(st.wrap(LogitBias::new(biases))?)
        }
        "allowed_tokens" => {
            st.allow(&["ids"])?;
            let ids = token_seqs(st, "ids")?.concat();
            Box::new(st.wrap(AllowedTokens::new(ids))?)
        }
        "bad_words" => {
            st.allow(&["words"])?;
            Box::new(BadWords::new(token_seqs(st, "words")?))
        }
        "min_tokens" => {
            st.allow(&["n", "eos"])?;
            let eos = token_seqs(st, "eos")?.concat();
            Box::new(st.wrap(MinTokens::new(st.get("n", 0)?, eos))?)
        }
        "ignore_eos" => {
            st.allow(&["eos"])?;
            Box::new(st.wrap(IgnoreEos::new(token_seqs(st, "eos")?.concat()))?)
        }
        "grammar" => {
            st.allow(&["file", "root", "mode"])?;
            Box::new(grammar_stage(st, "grammar", cx)?)
        }
        "json_schema" => {
            st.allow(&["file", "mode"])?;
            Box::new(grammar_stage(st, "json_schema", cx)?)
        }
        "grammar_lazy" => {
            st.allow(&["file", "triggers", "root", "mode"])?;
            Box::new(grammar_stage(st, "grammar_lazy", cx)?)
        }
        "reasoning_budget" => {
            st.allow(&["budget", "start", "end", "forced", "state"])?;
            let state = match st.plain("state")?.unwrap_or("idle") {
                "idle" => BudgetState::Idle,
                "counting" => BudgetState::Counting,
                s => return Err(st.err(format!("parameter `state`: `{s}` is not `idle` or `counting`"))),
            };
            let forced = token_seqs(st, "forced")?.concat();
            let (start, end) = (token_seqs(st, "start")?, token_seqs(st, "end")?);
            let vocab = cx.vocab.clone();
            Box::new(st.wrap(ReasoningBudget::new(st.get("budget", -1)?, &start, &end, &forced, state, vocab))?)
        }
        "adaptive_p" => {
            st.allow(&["target", "decay", "seed"])?;
            Box::new(st.wrap(AdaptiveP::new(st.get("target", -1.0)?, st.get("decay", 0.9)?, seed()?))?)
        }
        other => {
            return Err(st.err(format!(
                "unknown sampler `{other}` (known: greedy, dist, top_k, top_p, min_p, typical, tail_free, softmax, temp, temp_ext, xtc, top_n_sigma, mirostat, mirostat_v2, penalties, dry, logit_bias, adaptive_p, allowed_tokens, bad_words, min_tokens, ignore_eos, grammar, json_schema, grammar_lazy, reasoning_budget)"
            )));
        }
    };
    Ok(s)
}

/// Parses a SPEC into a chain; random stages without `seed=` get `default_seed`. Grammar stages
/// need [`parse_with`] and a vocabulary.
pub fn parse(spec: &str, default_seed: u64) -> Result<Chain> {
    parse_with(spec, &SpecContext { default_seed, ..SpecContext::default() })
}

/// Parses a SPEC into a chain in context `cx`.
pub fn parse_with(spec: &str, cx: &SpecContext) -> Result<Chain> {
    let mut chain = Chain::new();
    let parts: Vec<&str> = split_unquoted(spec, ';');
    for (i, part) in parts.iter().enumerate() {
        if part.trim().is_empty() {
            if i + 1 == parts.len() && i > 0 {
                continue; // trailing `;`
            }
            return Err(SamplingError::Spec { stage_index: i, stage: String::new(), message: "empty stage".into() });
        }
        let st = split_stage(i, part)?;
        chain.push(build(&st, cx)?);
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(parts: &[&str]) -> Value<'static> {
        Value::Quoted(parts.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn quoted_values_and_their_escapes() {
        assert_eq!(parse_value("k", "13|198 271"), Ok(Value::Plain("13|198 271")));
        assert_eq!(parse_value("k", r#""\n|:|\"|*""#), Ok(quoted(&["\n", ":", "\"", "*"])));
        assert_eq!(parse_value("k", r#""a\|b\\c\"d\;e\,f\)g\nh""#), Ok(quoted(&["a|b\\c\"d;e,f)g\nh"])));
        assert_eq!(parse_value("k", r#""a;b,c)d""#), Ok(quoted(&["a;b,c)d"])), "unescaped, as data");
        assert_eq!(parse_value("k", r#""""#), Ok(quoted(&[""])));
        assert_eq!(parse_value("k", r#""|""#), Ok(quoted(&["", ""])));
        assert_eq!(parse_value("k", "\"é\n\""), Ok(quoted(&["é\n"])), "a raw newline is text too");
        for (v, what) in [
            (r#""abc"#, "unterminated quote"),
            (r#""abc\"#, "unterminated escape"),
            (r#""a\"#, "unterminated escape"),
            (r#""a\""#, "unterminated quote"),
            (r#""a\tb""#, "unknown escape `\\t`"),
            (r#""a"b"#, "after the closing quote"),
            (r#"a"b""#, "a quote may only enclose the whole value"),
        ] {
            let e = parse_value("breakers", v).unwrap_err();
            assert!(e.contains("parameter `breakers`") && e.contains(what), "{v}: {e}");
        }
    }

    #[test]
    fn separators_inside_quotes_are_data() {
        assert_eq!(split_unquoted(r#"a;dry(b="x;y\";z");c"#, ';'), ["a", r#"dry(b="x;y\";z")"#, "c"]);
        assert_eq!(split_unquoted(r#"k="a,b",m=1"#, ','), [r#"k="a,b""#, "m=1"]);
        assert!(ends_quoted(r#"k="a\""#));
        assert!(!ends_quoted(r#"k="a\\""#));
        let st = split_stage(2, r#" dry(multiplier=1, breakers="\n|a)b,c;d" ) "#).unwrap();
        assert_eq!((st.index, st.name.as_str()), (2, "dry"));
        assert_eq!(st.params["multiplier"], Value::Plain("1"));
        assert_eq!(st.params["breakers"], quoted(&["\n", "a)b,c;d"]));
        // A `)` inside quotes does not close the stage.
        let e = split_stage(0, r#"dry(breakers="a)"#).err().unwrap().to_string();
        assert!(e.contains("dry") && e.contains("`breakers`") && e.contains("unterminated quote"), "{e}");
        let e = split_stage(0, r#"dry(breakers="a")x"#).err().unwrap().to_string();
        assert!(e.contains("missing `)`"), "{e}");
    }

    #[test]
    fn quote_reads_back() {
        let strings = ["\n", ":", "\"", "*", "a|b\\c", "x;y,z)", ""];
        let q = quote(&strings);
        assert_eq!(parse_value("k", &q), Ok(quoted(&strings)));
        assert_eq!(quote(&["\n", ":", "\"", "*"]), r#""\n|:|\"|*""#);
    }
}
