//! JSON helpers: compact serialisation as nlohmann::json's `dump()` writes it (the text of
//! `const`/`enum` literals and property keys in the grammar), JSON-pointer building and decoding,
//! and the JSON type of a value.

use crate::types::Types;
use serde_json::{Number, Value};
use std::fmt::Write as _;

/// `value` as compact JSON, byte for byte as nlohmann's `dump()` (no spaces; non-ASCII kept;
/// control characters other than `\b \f \n \r \t` as lowercase `\u00xx`; floats in its format).
pub(crate) fn dump(value: &Value) -> String {
    let mut out = String::new();
    dump_into(value, &mut out);
    out
}

fn dump_into(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => dump_string_into(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                dump_into(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                dump_string_into(key, out);
                out.push(':');
                dump_into(item, out);
            }
            out.push('}');
        }
    }
}

/// A string as a JSON string literal, quotes included.
pub(crate) fn dump_string(s: &str) -> String {
    let mut out = String::new();
    dump_string_into(s, &mut out);
    out
}

fn dump_string_into(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn number(n: &Number) -> String {
    if let Some(u) = n.as_u64() {
        u.to_string()
    } else if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A double as nlohmann writes it: the shortest digits that read back to the same value, placed
/// as `123.0`, `1.5`, `0.001` while the decimal exponent lies in (-4, 15], else as `1.5e+20` /
/// `1e-05` (a sign and at least two exponent digits).
pub(crate) fn float(x: f64) -> String {
    if !x.is_finite() {
        return "null".to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5", "1e20".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let k = digits.len() as i32;
    // The value is 0.d1d2...dk * 10^n.
    let n = exp + 1;
    const MIN_EXP: i32 = -4;
    const MAX_EXP: i32 = 15;
    let body = if k <= n && n <= MAX_EXP {
        format!("{digits}{}.0", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= MAX_EXP {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if MIN_EXP < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let (first, rest) = digits.split_at(1);
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        let dot = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        format!("{first}{dot}e{e_sign}{:02}", e.abs())
    };
    format!("{sign}{body}")
}

/// The JSON type of an instance value (a number with no fractional part is an integer, as
/// JSON Schema counts it).
pub(crate) fn value_type(value: &Value) -> Types {
    match value {
        Value::Null => Types::NULL,
        Value::Bool(_) => Types::BOOLEAN,
        Value::Number(n) => {
            if n.is_u64() || n.is_i64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                Types::INTEGER
            } else {
                Types::FRACTION
            }
        }
        Value::String(_) => Types::STRING,
        Value::Array(_) => Types::ARRAY,
        Value::Object(_) => Types::OBJECT,
    }
}

/// `parent` extended by one reference token, escaped as RFC 6901 asks (`~` as `~0`, `/` as `~1`).
pub(crate) fn child(parent: &str, token: &str) -> String {
    let mut out = String::with_capacity(parent.len() + token.len() + 1);
    out.push_str(parent);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// `parent` extended by an array index.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}/{i}")
}

/// One reference token of a JSON pointer, unescaped.
pub(crate) fn unescape_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_as_nlohmann_writes_them() {
        let cases = [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e14, "100000000000000.0"),
            (1e15, "1e+15"),
            (1.25e20, "1.25e+20"),
            (1e100, "1e+100"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (123456.789, "123456.789"),
        ];
        for (x, want) in cases {
            assert_eq!(float(x), want, "{x}");
        }
    }

    #[test]
    fn compact_dump() {
        let v = json!({"b": [1, -2, 3.5, null, true], "a": "x\"\\\n\u{1}é/"});
        assert_eq!(dump(&v), r#"{"b":[1,-2,3.5,null,true],"a":"x\"\\\n\u0001é/"}"#);
        assert_eq!(dump(&json!(18446744073709551615u64)), "18446744073709551615");
    }

    #[test]
    fn pointers() {
        assert_eq!(child("", "a/b~c"), "/a~1b~0c");
        assert_eq!(unescape_token("a~1b~0c"), "a/b~c");
        assert_eq!(index("/items", 3), "/items/3");
    }
}
