//! The grammar being built (rules by name, printed in name order) and the fixed rule texts:
//! the `space` rule, the primitive JSON rules and the string-format rules, with the helpers that
//! name rules, quote literals and write repetitions as llama.cpp's converter does.

use std::collections::BTreeMap;

/// Optional whitespace between tokens: nothing, one space, or one or two newlines and an indent.
pub(crate) const SPACE_RULE: &str = r#"| " " | "\n"{1,2} [ \t]{0,20}"#;

/// A rule text and the rules it refers to.
pub(crate) struct Builtin {
    pub(crate) name: &'static str,
    pub(crate) body: &'static str,
    pub(crate) deps: &'static [&'static str],
}

/// The JSON value rules.
pub(crate) const PRIMITIVES: &[Builtin] = &[
    Builtin { name: "boolean", body: r#"("true" | "false") space"#, deps: &[] },
    Builtin { name: "decimal-part", body: "[0-9]{1,16}", deps: &[] },
    Builtin { name: "integral-part", body: "[0] | [1-9] [0-9]{0,15}", deps: &[] },
    Builtin {
        name: "number",
        body: r#"("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space"#,
        deps: &["integral-part", "decimal-part"],
    },
    Builtin { name: "integer", body: r#"("-"? integral-part) space"#, deps: &["integral-part"] },
    Builtin {
        name: "value",
        body: "object | array | string | number | boolean | null",
        deps: &["object", "array", "string", "number", "boolean", "null"],
    },
    Builtin {
        name: "object",
        body: r#""{" space ( string ":" space value ("," space string ":" space value)* )? "}" space"#,
        deps: &["string", "value"],
    },
    Builtin { name: "array", body: r#""[" space ( value ("," space value)* )? "]" space"#, deps: &["value"] },
    Builtin {
        name: "uuid",
        body: r#""\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space"#,
        deps: &[],
    },
    Builtin { name: "char", body: r#"[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})"#, deps: &[] },
    Builtin { name: "string", body: r#""\"" char* "\"" space"#, deps: &["char"] },
    Builtin { name: "null", body: r#""null" space"#, deps: &[] },
];

/// The string formats: the bare text of a value (`date`) and the quoted JSON string
/// (`date-string`).
pub(crate) const FORMATS: &[Builtin] = &[
    Builtin {
        name: "date",
        body: r#"[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )"#,
        deps: &[],
    },
    Builtin {
        name: "time",
        body: r#"([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#,
        deps: &[],
    },
    Builtin { name: "date-time", body: r#"date "T" time"#, deps: &["date", "time"] },
    Builtin { name: "date-string", body: r#""\"" date "\"" space"#, deps: &["date"] },
    Builtin { name: "time-string", body: r#""\"" time "\"" space"#, deps: &["time"] },
    Builtin { name: "date-time-string", body: r#""\"" date-time "\"" space"#, deps: &["date-time"] },
];

pub(crate) fn primitive(name: &str) -> Option<&'static Builtin> {
    PRIMITIVES.iter().find(|b| b.name == name)
}

pub(crate) fn format_rule(name: &str) -> Option<&'static Builtin> {
    FORMATS.iter().find(|b| b.name == name)
}

/// Names a schema's rule may not take as they are (it gets a `-` appended): `root` and the
/// builtin rules.
pub(crate) fn is_reserved(name: &str) -> bool {
    name == "root" || primitive(name).is_some() || format_rule(name).is_some()
}

/// `name` with each run of characters outside `[a-zA-Z0-9-]` replaced by one `-`.
pub(crate) fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// `text` as a grammar string literal: quoted, with `\r`, `\n`, `"` and `\` escaped.
pub(crate) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `item` repeated `min` to `max` times (`None`: no upper bound); with a separator, the
/// separator goes between items (`item ("," space item){2,4}`).
pub(crate) fn repetition(item: &str, min: u32, max: Option<u32>, separator: &str) -> String {
    if max == Some(0) {
        return String::new();
    }
    if min == 0 && max == Some(1) {
        return format!("{item}?");
    }
    if separator.is_empty() {
        return match (min, max) {
            (1, None) => format!("{item}+"),
            (0, None) => format!("{item}*"),
            (min, max) => format!("{item}{{{min},{}}}", max.map(|m| m.to_string()).unwrap_or_default()),
        };
    }
    let rest = repetition(&format!("({separator} {item})"), min.saturating_sub(1), max.map(|m| m - 1), "");
    let result = format!("{item} {rest}");
    if min == 0 { format!("({result})?") } else { result }
}

/// The rules so far, by name.
#[derive(Debug)]
pub(crate) struct Rules {
    rules: BTreeMap<String, String>,
}

impl Rules {
    pub(crate) fn new() -> Self {
        let mut rules = BTreeMap::new();
        rules.insert("space".to_owned(), SPACE_RULE.to_owned());
        Rules { rules }
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.rules.contains_key(name)
    }

    /// Adds `body` under `name` (sanitised) and returns the name it got: the name itself when
    /// free or already holding the same body, else the name with the first number appended
    /// (0, 1, ...) that is free or holds the same body.
    pub(crate) fn add(&mut self, name: &str, body: &str) -> String {
        let base = sanitize(name);
        if self.rules.get(&base).is_none_or(|b| b == body) {
            self.rules.insert(base.clone(), body.to_owned());
            return base;
        }
        let mut i = 0usize;
        loop {
            let key = format!("{base}{i}");
            if self.rules.get(&key).is_none_or(|b| b == body) {
                self.rules.insert(key.clone(), body.to_owned());
                return key;
            }
            i += 1;
        }
    }

    /// Adds a builtin rule under `name`, and the builtin rules it refers to that are not there
    /// yet under their own names.
    pub(crate) fn add_builtin(&mut self, name: &str, builtin: &Builtin) -> String {
        let added = self.add(name, builtin.body);
        for dep in builtin.deps {
            if !self.contains(dep) {
                let rule =
                    primitive(dep).or_else(|| format_rule(dep)).expect("builtin rules only refer to builtin rules");
                self.add_builtin(dep, rule);
            }
        }
        added
    }

    /// Adds the primitive rule `primitive` under its own name.
    pub(crate) fn add_primitive(&mut self, primitive_name: &str) -> String {
        let rule = primitive(primitive_name).expect("a primitive rule name");
        self.add_builtin(primitive_name, rule)
    }

    /// The grammar text: one `name ::= body` line per rule, in name order.
    pub(crate) fn format(&self) -> String {
        let mut out = String::new();
        for (name, body) in &self.rules {
            out.push_str(name);
            out.push_str(" ::= ");
            out.push_str(body);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions() {
        assert_eq!(repetition("x", 0, Some(0), ""), "");
        assert_eq!(repetition("x", 0, Some(1), ""), "x?");
        assert_eq!(repetition("x", 1, None, ""), "x+");
        assert_eq!(repetition("x", 0, None, ""), "x*");
        assert_eq!(repetition("x", 3, Some(3), ""), "x{3,3}");
        assert_eq!(repetition("x", 3, None, ""), "x{3,}");
        assert_eq!(repetition("x", 0, Some(2), "\",\" space"), "(x (\",\" space x)?)?");
        assert_eq!(repetition("x", 3, Some(5), "\",\" space"), "x (\",\" space x){2,4}");
        assert_eq!(repetition("x", 2, None, "\",\" space"), "x (\",\" space x)+");
    }

    #[test]
    fn names() {
        assert_eq!(sanitize("a b!!c-d_é"), "a-b-c-d-");
        assert!(is_reserved("root") && is_reserved("date-time-string") && !is_reserved("foo"));
        let mut r = Rules::new();
        assert_eq!(r.add("x y", "a"), "x-y");
        assert_eq!(r.add("x-y", "a"), "x-y");
        assert_eq!(r.add("x-y", "b"), "x-y0");
        assert_eq!(r.add("x-y", "c"), "x-y1");
        assert_eq!(r.add("x-y", "b"), "x-y0");
    }
}
