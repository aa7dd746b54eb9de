//! The report's markdown: a heading per section with how it ended, its top-level values as a list
//! and every list of records in its JSON as a table (nested lists flattened into rows that repeat
//! their parent's values), so that a suite's JSON needs no renderer of its own.

use super::Status;
use super::sections::Section;
use serde_json::{Map, Value};
use std::fmt::Write;

/// The whole report.
pub(super) fn report(results: &[(&Section, Status, f64, Value)], total: f64, quick: bool) -> String {
    let mut md = String::from("# gpu-report\n\n");
    let device = results.iter().find(|r| r.0.name == "device").and_then(|r| r.3.get("name")).and_then(Value::as_str);
    let _ = writeln!(md, "- device: {}", device.unwrap_or("(no Vulkan device opened)"));
    let _ = writeln!(
        md,
        "- mode: {}",
        if quick { "--quick (smoke test: one smallest size per section, not a measurement)" } else { "full" }
    );
    let _ = writeln!(md, "- total: {total:.1} s\n");
    let _ = writeln!(md, "| section | status | seconds |\n| --- | --- | --- |");
    for (s, status, secs, _) in results {
        let _ = writeln!(md, "| {} | {} | {secs:.1} |", s.name, status_text(status));
    }
    for (s, status, secs, data) in results {
        let _ = writeln!(md, "\n## {}: {}\n\n{} in {secs:.1} s.\n", s.name, s.title, status_text(status));
        if !data.is_null() {
            md.push_str(&render(data));
        }
    }
    md
}

fn status_text(s: &Status) -> String {
    match s {
        Status::Ok => "ok".into(),
        Status::Failed(why) => format!("FAILED ({why})"),
        Status::TimedOut(limit) => format!("TIMED OUT (limit {limit} s)"),
    }
}

/// One section's JSON: scalars as a list, lists of records as tables, lists of strings as lists.
fn render(doc: &Value) -> String {
    let mut md = String::new();
    let Some(obj) = doc.as_object() else { return format!("{}\n", cell(doc)) };
    for (k, v) in obj {
        if is_scalar(v) {
            let _ = writeln!(md, "- {k}: {}", cell(v));
        }
    }
    for (k, v) in obj {
        let Some(items) = v.as_array() else { continue };
        if items.is_empty() {
            let _ = writeln!(md, "\n{k}: none");
        } else if items.iter().all(Value::is_object) {
            let mut tables = Vec::new();
            for i in items {
                flatten(k, &Map::new(), i, &mut tables);
            }
            for (name, rows) in &tables {
                let _ = write!(md, "\n{name}:\n\n{}", table(rows));
            }
        } else {
            let _ = writeln!(md, "\n{k}:");
            for i in items {
                let _ = writeln!(md, "- {}", cell(i));
            }
        }
    }
    md
}

fn is_scalar(v: &Value) -> bool {
    !(v.is_array() || v.is_object())
}

/// Adds the rows a record makes to `tables`: its scalars (after `parent`'s) are one row of table
/// `name`, or, where it holds lists of records, the parent values of each of their rows, in a table
/// per list (`name.key`).
fn flatten(name: &str, parent: &Map<String, Value>, item: &Value, tables: &mut Vec<(String, Vec<Map<String, Value>>)>) {
    let Some(obj) = item.as_object() else { return };
    let mut row = parent.clone();
    for (k, v) in obj {
        if is_scalar(v) {
            row.insert(k.clone(), v.clone());
        }
    }
    let inner: Vec<(&String, &Vec<Value>)> = obj
        .iter()
        .filter_map(|(k, v)| v.as_array().filter(|a| !a.is_empty() && a.iter().all(Value::is_object)).map(|a| (k, a)))
        .collect();
    for (k, items) in &inner {
        for i in *items {
            flatten(&format!("{name}.{k}"), &row, i, tables);
        }
    }
    if inner.is_empty() {
        match tables.iter_mut().find(|t| t.0 == name) {
            Some(t) => t.1.push(row),
            None => tables.push((name.to_string(), vec![row])),
        }
    }
}

fn table(rows: &[Map<String, Value>]) -> String {
    let mut cols: Vec<&String> = Vec::new();
    for r in rows {
        for k in r.keys() {
            if !cols.contains(&k) {
                cols.push(k);
            }
        }
    }
    let mut md = format!(
        "| {} |\n|{}\n",
        cols.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(" | "),
        " --- |".repeat(cols.len())
    );
    for r in rows {
        let cells: Vec<String> = cols.iter().map(|c| r.get(*c).map_or(String::new(), cell)).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md
}

/// A value as a table cell: numbers to about four significant digits, strings without quotes.
fn cell(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            match x.abs() {
                a if a >= 1000.0 => format!("{x:.0}"),
                a if a >= 100.0 => format!("{x:.1}"),
                a if a >= 1.0 => format!("{x:.2}"),
                0.0 => "0".into(),
                // four significant digits: 0.0007924
                a => format!("{x:.*}", (3 - a.log10().floor() as i32).clamp(3, 12) as usize),
            }
        }
        Value::String(s) => s.replace('|', "\\|"),
        Value::Null => String::new(),
        other => other.to_string().replace('|', "\\|"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_lists_become_rows_that_repeat_their_parent() {
        assert_eq!(cell(&serde_json::json!(0.000792411)), "0.0007924");
        assert_eq!(cell(&serde_json::json!(0.5)), "0.5000");
        let doc = serde_json::json!({
            "suite": "x", "n": 2,
            "results": [
                {"v": 10, "chains": [{"name": "a", "us": 1.5}, {"name": "b", "us": 2.25}]},
                {"v": 20, "chains": [{"name": "a", "us": 1234.5}], "other": [{"w": 1}]},
            ],
            "notes": ["one | two"],
        });
        let md = render(&doc);
        assert!(md.contains("- suite: x\n- n: 2\n"), "{md}");
        assert!(md.contains("results.chains:\n\n| v | name | us |\n| --- | --- | --- |\n| 10 | a | 1.50 |\n| 10 | b | 2.25 |\n| 20 | a | 1234 |\n"), "{md}");
        assert!(md.contains("results.other:\n\n| v | w |\n| --- | --- |\n| 20 | 1 |\n"), "{md}");
        assert!(md.contains("- one \\| two"), "{md}");
    }
}
