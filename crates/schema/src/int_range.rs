//! Integers within bounds as grammar text, digit by digit, as llama.cpp's converter builds them.
//!
//! A closed range splits by number of digits; each same-length range `from..=to` splits at the
//! first digit where the two differ. A half-open range lists the numbers by length up to the
//! 16 digits of the `integral-part` rule. The caller keeps the bounds where this is exact (see
//! `Converter::integer_bounds`).

use std::fmt::Write as _;

/// Digits allowed for a number without an upper bound (as in `integral-part`).
const DECIMALS: i32 = 16;

/// The alternatives for the integers in `[min, max]` (`None`: unbounded on that side; at least
/// one side is bounded).
pub(crate) fn int_range(min: Option<i64>, max: Option<i64>) -> String {
    let mut out = String::new();
    range(min, max, &mut out, DECIMALS, true);
    out
}

fn digit_range(out: &mut String, from: u8, to: u8) {
    out.push('[');
    out.push(char::from(from));
    if from != to {
        out.push('-');
        out.push(char::from(to));
    }
    out.push(']');
}

/// `[0-9]` repeated `min` to `max` times.
fn more_digits(out: &mut String, min: i32, max: i32) {
    out.push_str("[0-9]");
    if min == max && min == 1 {
        return;
    }
    let _ = write!(out, "{{{min}");
    if max != min {
        out.push(',');
        if max != i32::MAX {
            let _ = write!(out, "{max}");
        }
    }
    out.push('}');
}

/// The numbers from `from` to `to`, both written with the same number of digits.
fn uniform_range(out: &mut String, from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i < from.len() && i < to.len() && from[i] == to[i] {
        i += 1;
    }
    if i > 0 {
        out.push('"');
        out.push_str(std::str::from_utf8(&from[..i]).unwrap_or_default());
        out.push('"');
    }
    if i >= from.len() || i >= to.len() {
        return;
    }
    if i > 0 {
        out.push(' ');
    }
    let sub_len = from.len() - i - 1;
    if sub_len == 0 {
        out.push('[');
        out.push(char::from(from[i]));
        out.push('-');
        out.push(char::from(to[i]));
        out.push(']');
        return;
    }
    let from_sub = &from[i + 1..];
    let to_sub = &to[i + 1..];
    let zeros = vec![b'0'; sub_len];
    let nines = vec![b'9'; sub_len];
    let width = sub_len as i32;
    let mut to_reached = false;
    out.push('(');
    if from_sub == zeros.as_slice() {
        digit_range(out, from[i], to[i] - 1);
        out.push(' ');
        more_digits(out, width, width);
    } else {
        out.push('[');
        out.push(char::from(from[i]));
        out.push_str("] (");
        uniform_range(out, from_sub, &nines);
        out.push(')');
        if i32::from(from[i]) < i32::from(to[i]) - 1 {
            out.push_str(" | ");
            if to_sub == nines.as_slice() {
                digit_range(out, from[i] + 1, to[i]);
                to_reached = true;
            } else {
                digit_range(out, from[i] + 1, to[i] - 1);
            }
            out.push(' ');
            more_digits(out, width, width);
        }
    }
    if !to_reached {
        out.push_str(" | ");
        digit_range(out, to[i], to[i]);
        out.push(' ');
        uniform_range(out, &zeros, to_sub);
    }
    out.push(')');
}

fn range(min: Option<i64>, max: Option<i64>, out: &mut String, decimals_left: i32, top: bool) {
    let less_decimals = (decimals_left - 1).max(1);
    match (min, max) {
        (Some(mut lo), Some(hi)) => {
            if lo < 0 && hi < 0 {
                out.push_str("\"-\" (");
                range(Some(-hi), Some(-lo), out, decimals_left, true);
                out.push(')');
                return;
            }
            if lo < 0 {
                out.push_str("\"-\" (");
                range(Some(0), Some(-lo), out, decimals_left, true);
                out.push_str(") | ");
                lo = 0;
            }
            let mut min_s = lo.to_string();
            let max_s = hi.to_string();
            for digits in min_s.len()..max_s.len() {
                uniform_range(out, min_s.as_bytes(), "9".repeat(digits).as_bytes());
                min_s = format!("1{}", "0".repeat(digits));
                out.push_str(" | ");
            }
            uniform_range(out, min_s.as_bytes(), max_s.as_bytes());
        }
        (Some(lo), None) => {
            if lo < 0 {
                out.push_str("\"-\" (");
                range(None, Some(-lo), out, decimals_left, false);
                out.push_str(") | [0] | [1-9] ");
                more_digits(out, 0, decimals_left - 1);
            } else if lo == 0 {
                if top {
                    out.push_str("[0] | [1-9] ");
                    more_digits(out, 0, less_decimals);
                } else {
                    more_digits(out, 1, decimals_left);
                }
            } else if lo <= 9 {
                let c = b'0' + lo as u8;
                let range_start = if top { b'1' } else { b'0' };
                if c > range_start {
                    digit_range(out, range_start, c - 1);
                    out.push(' ');
                    more_digits(out, 1, less_decimals);
                    out.push_str(" | ");
                }
                digit_range(out, c, b'9');
                out.push(' ');
                more_digits(out, 0, less_decimals);
            } else {
                let min_s = lo.to_string();
                let len = min_s.len() as i32;
                let c = min_s.as_bytes()[0];
                if c > b'1' {
                    digit_range(out, if top { b'1' } else { b'0' }, c - 1);
                    out.push(' ');
                    more_digits(out, len, less_decimals);
                    out.push_str(" | ");
                }
                digit_range(out, c, c);
                out.push_str(" (");
                let rest: i64 = min_s[1..].parse().unwrap_or(0);
                range(Some(rest), None, out, less_decimals, false);
                out.push(')');
                if c < b'9' {
                    out.push_str(" | ");
                    digit_range(out, c + 1, b'9');
                    out.push(' ');
                    more_digits(out, len - 1, less_decimals);
                }
            }
        }
        (None, Some(hi)) => {
            if hi >= 0 {
                if top {
                    out.push_str("\"-\" [1-9] ");
                    more_digits(out, 0, less_decimals);
                    out.push_str(" | ");
                }
                range(Some(0), Some(hi), out, decimals_left, true);
            } else {
                out.push_str("\"-\" (");
                range(Some(-hi), None, out, decimals_left, false);
                out.push(')');
            }
        }
        (None, None) => unreachable!("an integer range has at least one bound"),
    }
}
