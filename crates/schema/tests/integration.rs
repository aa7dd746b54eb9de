//! The schema cases (`test_schema`) of llama.cpp's `tests/test-grammar-integration.cpp`: each
//! schema is converted here, the grammar built with the `grammar` crate, and every string llama.cpp
//! expects to pass must match it (`Grammar::matches`, llama.cpp's `match_string`) and every string
//! it expects to fail must not. One test per llama.cpp test function (`test_simple_grammar`,
//! `test_json_schema`); each reports every wrong string by case name. The schemas and strings are
//! llama.cpp's test data; the code is ours. The plain-grammar cases of that file live in
//! `crates/grammar/tests/integration.rs`.
//!
//! One case ("required props") uses keywords that llama.cpp ignores and this crate refuses on
//! purpose (`exclusiveMinimum` on a number, `uniqueItems`); see [`Case::ignored_by_llama`].

use grammar::Grammar;
use schema::{SchemaError, to_grammar, to_grammar_str};
use serde_json::Value;

struct Case {
    name: &'static str,
    schema: &'static str,
    passing: &'static [&'static str],
    failing: &'static [&'static str],
    /// JSON pointers of keywords that llama.cpp's converter drops without a word and that this
    /// crate refuses with [`SchemaError::Unsupported`] (a deliberate difference), in the order the
    /// refusals come: the schema must be refused at the first, and with it removed at the next,
    /// and so on. With all of them removed the schema is the one llama.cpp's grammar stands for,
    /// and the strings are checked against that.
    ignored_by_llama: &'static [&'static str],
}

impl Case {
    const fn new(
        name: &'static str,
        schema: &'static str,
        passing: &'static [&'static str],
        failing: &'static [&'static str],
    ) -> Self {
        Self { name, schema, passing, failing, ignored_by_llama: &[] }
    }
}

/// Removes the member named by `pointer` (whose last segment is the key, with no escapes).
fn remove(schema: &mut Value, pointer: &str) -> bool {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer below the root");
    schema.pointer_mut(parent).and_then(Value::as_object_mut).and_then(|o| o.shift_remove(key)).is_some()
}

/// The grammar for the case, after checking its deliberate refusals; `Err` says what went wrong.
fn grammar_for(case: &Case) -> Result<String, String> {
    if case.ignored_by_llama.is_empty() {
        return to_grammar_str(case.schema).map_err(|e| format!("the conversion failed: {e}"));
    }
    let mut schema: Value = serde_json::from_str(case.schema).map_err(|e| format!("bad test schema: {e}"))?;
    for &pointer in case.ignored_by_llama {
        match to_grammar(&schema) {
            Ok(_) => return Err(format!("expected the deliberate refusal at {pointer}, but it converted")),
            Err(e @ SchemaError::Unsupported { .. }) if e.pointer() == Some(pointer) => {}
            Err(e) => return Err(format!("expected the deliberate refusal at {pointer}, got: {e}")),
        }
        if !remove(&mut schema, pointer) {
            return Err(format!("bad test data: nothing at {pointer}"));
        }
    }
    to_grammar(&schema).map_err(|e| format!("without the keywords llama.cpp ignores, the conversion failed: {e}"))
}

/// One line per problem with `case`.
fn check(case: &Case) -> Vec<String> {
    let name = if case.name.is_empty() { "(unnamed)" } else { case.name };
    let text = match grammar_for(case) {
        Ok(text) => text,
        Err(why) => return vec![format!("{name}: {why}")],
    };
    let g = match Grammar::new(&text) {
        Ok(g) => g,
        Err(e) => return vec![format!("{name}: the grammar does not build: {e}\n{text}")],
    };
    let mut problems = Vec::new();
    for (input, want) in case.passing.iter().map(|s| (s, true)).chain(case.failing.iter().map(|s| (s, false))) {
        if g.matches(input) != want {
            let verdict = if want { "did not match (llama.cpp: matches)" } else { "matched (llama.cpp: no match)" };
            problems.push(format!("{name}: {input:?} {verdict}"));
        }
    }
    if !problems.is_empty() {
        problems.push(format!("{name}: the grammar was:\n{text}"));
    }
    problems
}

fn check_all(cases: &[Case]) {
    let problems: Vec<String> = cases.iter().flat_map(check).collect();
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn simple_grammar() {
    check_all(&[
        Case::new(
            "min 0",
            r#"{"type": "integer", "minimum": 0}"#,
            &["0", "10", "12", "10000"],
            &[
                "-1",
                "-10",
                "-10000",
                "-100000000000000000000000000000000",
                "100000000000000000000000000000000",
                "00",
                "01",
                "-0",
            ],
        ),
        Case::new(
            "min 2",
            r#"{"type": "integer", "minimum": 2}"#,
            &["2", "3", "4", "10", "20", "1234567890000000"],
            &["0", "1", "-1", "-100", "0", "1", "01", "02", "12345678900000000"],
        ),
        Case::new(
            "min 456",
            r#"{"type": "integer", "minimum": 456}"#,
            &["456", "4560", "457", "460", "500"],
            &["455", "356", "50", "050", "-1", "-456"],
        ),
        Case::new(
            "min -123",
            r#"{"type": "integer", "minimum": -123}"#,
            &["-123", "-122", "-11", "-1", "0", "1", "123", "1234", "2345"],
            &["-1234", "-124"],
        ),
        Case::new("max 9999", r#"{"type": "integer", "maximum": 9999}"#, &["-99999", "0", "9999"], &["10000", "99991"]),
        Case::new(
            "max -9999",
            r#"{"type": "integer", "maximum": -9999}"#,
            &["-10000", "-9999"],
            &["-9998", "0", "9999"],
        ),
        Case::new(
            "min 5 max 30",
            r#"{"type": "integer", "minimum": 5, "maximum": 30}"#,
            &["5", "10", "30"],
            &["05", "4", "-1", "31", "123", "0123"],
        ),
        Case::new(
            "min 1 max 900719925474091",
            r#"{"type": "integer", "exclusiveMinimum": 0, "maximum": 900719925474091}"#,
            &["1", "2", "10", "900719925474090", "900719925474091"],
            &["0", "01", "900719925474092", "9007199254740910"],
        ),
        Case::new(
            "min -1 max 1",
            r#"{"type": "integer", "minimum": -1, "maximum": 1}"#,
            &["-1", "0", "1"],
            &["-11", "-10", "-2", "2", "10", "11"],
        ),
        Case::new(
            "min -123 max 42",
            r#"{"type": "integer", "minimum": -123, "maximum": 42}"#,
            &["-123", "-122", "-13", "-11", "-2", "-1", "0", "1", "5", "10", "39", "40", "42"],
            &["-0123", "-124", "-1123", "-200", "43", "123", "0123"],
        ),
        Case::new(
            "exclusive min / max",
            r#"{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10000}"#,
            &["1", "9999"],
            &["0", "01", "10000", "99999"],
        ),
    ]);
}

const ADDRESS: &str = r#"{
    "type": "object",
    "properties": {
        "number": { "type": "number" },
        "street_name": { "type": "string" },
        "street_type": { "enum": ["Street", "Avenue", "Boulevard"] }
    }
}"#;

const ADDRESS_OPEN: &str = r#"{
    "type": "object",
    "properties": {
        "number": { "type": "number" },
        "street_name": { "type": "string" },
        "street_type": { "enum": ["Street", "Avenue", "Boulevard"] }
    },
    "additionalProperties": true
}"#;

const ADDRESS_CLOSED: &str = r#"{
    "type": "object",
    "properties": {
        "number": { "type": "number" },
        "street_name": { "type": "string" },
        "street_type": { "enum": ["Street", "Avenue", "Boulevard"] }
    },
    "additionalProperties": false
}"#;

const PRODUCT: &str = r#"{
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://example.com/product.schema.json",
    "title": "Product",
    "description": "A product from Acme's catalog",
    "type": "object",
    "properties": {
        "productId": {
            "description": "The unique identifier for a product",
            "type": "integer"
        },
        "productName": {
            "description": "Name of the product",
            "type": "string"
        },
        "price": {
            "description": "The price of the product",
            "type": "number",
            "exclusiveMinimum": 0
        },
        "tags": {
            "description": "Tags for the product",
            "type": "array",
            "items": { "type": "string" },
            "minItems": 1,
            "uniqueItems": true
        },
        "dimensions": {
            "type": "object",
            "properties": {
                "length": { "type": "number" },
                "width": { "type": "number" },
                "height": { "type": "number" }
            },
            "required": ["length", "width", "height"]
        }
    },
    "required": ["productId", "productName", "price"]
}"#;

#[test]
fn json_schema() {
    check_all(&[
        Case::new("empty schema (object)", "{}", &[r#"{}"#, r#"{"foo": "bar"}"#], &["", "[]", "null", r#""""#, "true"]),
        Case::new(
            "exotic formats (list)",
            r#"{
                "items": [
                    { "format": "date" },
                    { "format": "uuid" },
                    { "format": "time" },
                    { "format": "date-time" }
                ]
            }"#,
            &[r#"["2012-04-23", "12345678-1234-1234-1234-1234567890ab", "18:25:43.511Z", "2012-04-23T18:25:43.511Z"]"#],
            &[r#"["foo", "bar"]"#, r#"["12345678-1234-1234-1234-1234567890ab"]"#],
        ),
        Case::new("string", r#"{"type": "string"}"#, &[r#""foo""#, r#""bar""#, r#""""#], &[r#"{}"#, r#""foo": "bar""#]),
        Case::new(
            "string w/ min length 1",
            r#"{"type": "string", "minLength": 1}"#,
            &[r#""foo""#, r#""bar""#],
            &[r#""""#, r#"{}"#, r#""foo": "bar""#],
        ),
        Case::new(
            "string w/ min length 3",
            r#"{"type": "string", "minLength": 3}"#,
            &[r#""foo""#, r#""bar""#, r#""foobar""#],
            &[r#""""#, r#""f""#, r#""fo""#],
        ),
        Case::new(
            "string w/ max length",
            r#"{"type": "string", "maxLength": 3}"#,
            &[r#""foo""#, r#""bar""#, r#""""#, r#""f""#, r#""fo""#],
            &[r#""foobar""#],
        ),
        Case::new(
            "string w/ min & max length",
            r#"{"type": "string", "minLength": 1, "maxLength": 4}"#,
            &[r#""foo""#, r#""bar""#, r#""f""#, r#""barf""#],
            &[r#""""#, r#""barfo""#, r#""foobar""#],
        ),
        Case::new("boolean", r#"{"type": "boolean"}"#, &["true", "false"], &[r#""""#, r#""true""#, "True", "FALSE"]),
        Case::new(
            "integer",
            r#"{"type": "integer"}"#,
            &["0", "12345", "1234567890123456"],
            &["", "01", "007", "12345678901234567  "],
        ),
        Case::new("string const", r#"{"const": "foo"}"#, &[r#""foo""#], &["foo", r#""bar""#]),
        Case::new("non-string const", r#"{"const": true}"#, &["true"], &["", "foo", r#""true""#]),
        Case::new(
            "non-string const",
            r#"{"enum": ["red", "amber", "green", null, 42, ["foo"]]}"#,
            &[r#""red""#, "null", "42", r#"["foo"]"#],
            &["", "420", "true", "foo"],
        ),
        Case::new(
            "simple pattern",
            r#"{"pattern": "^[a-zA-Z0-9_-]*$"}"#,
            &[r#""""#, r#""He_llo-12""#],
            &[r#""!""#, r#""Hello World""#],
        ),
        Case::new(
            "pattern with escapes",
            r#"{"pattern": "^a\\^\\$\\.\\[\\]\\(\\)\\|\\{\\}\\*\\+\\?b$"}"#,
            &[r#""a^$.[]()|{}*+?b""#],
            &[r#""ab""#],
        ),
        Case::new(
            "",
            r#"{"type": ["array", "null"], "items": { "type": "string" }}"#,
            &["null", "[]", r#"["123"]"#, r#"["foo", "bar"]"#],
            &["", "[123]", r#""foo""#, r#"["foo", 42]"#],
        ),
        Case::new(
            "min+max items",
            r#"{"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5}"#,
            &["[1, 2, 3]", "[1, 2, 3, 4]", "[1, 2, 3, 4, 5]"],
            &["[1, 2]", "[1, 2, 3, 4, 5, 6]", "1"],
        ),
        Case::new(
            "object properties",
            ADDRESS,
            &[
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue"}"#,
                r#"{ "street_name": "Pennsylvania" }"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania" }"#,
                r#"{}"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type": "Avenue" }"#,
            ],
            &[
                r#"{ "number": "1600", "street_name": "Pennsylvania", "street_type":"Avenue"}"#,
                r#"{ "street_name": "Pennsylvania", "number": 1600 }"#,
                r#"{ "number": "1600", "street_name": "Pennsylvania", "street_type":"Avenue"}"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue", "direction":"NW"}"#,
            ],
        ),
        Case::new(
            "additional properties can't override other properties",
            r#"{
                "properties": {
                    "a": {"type": "integer"},
                    "b": {"type": "integer"}
                },
                "additionalProperties": true
            }"#,
            &[r#"{"a": 42}"#, r#"{"c": ""}"#, r#"{"a": 42, "c": ""}"#, r#"{"a_": ""}"#],
            &["", r#"{"a": ""}"#, r#"{"a": "", "b": ""}"#],
        ),
        Case::new(
            "object properties, additionalProperties: true",
            ADDRESS_OPEN,
            &[
                r#"{}"#,
                r#"{"number":1600,"street_name":"Pennsylvania","street_type":"Avenue"}"#,
                r#"{ "street_name": "Pennsylvania" }"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania" }"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue", "direction":"NW"}"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type": "Avenue" }"#,
            ],
            &[
                r#"{ "number": "1600", "street_name": "Pennsylvania", "street_type":"Avenue"}"#,
                r#"{ "street_name": "Pennsylvania", "number": 1600, "street_type":"Avenue"}"#,
            ],
        ),
        Case::new(
            "required + optional props each in original order",
            ADDRESS_CLOSED,
            &[
                r#"{ "street_name": "Pennsylvania" }"#,
                r#"{ "number": 1600, "street_type":"Avenue"}"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania" }"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue"}"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type": "Avenue" }"#,
            ],
            &[
                r#"{ "street_type": "Avenue", "number": 1600 }"#,
                r#"{ "number": 1600, "street_name": "Pennsylvania", "street_type": "Avenue", "direction": "NW" }"#,
            ],
        ),
        Case::new(
            "required + optional props each in original order",
            r#"{
                "properties": {
                    "b": {"type": "string"},
                    "a": {"type": "string"},
                    "d": {"type": "string"},
                    "c": {"type": "string"}
                },
                "required": ["a", "b"],
                "additionalProperties": false
            }"#,
            &[
                r#"{"b": "foo", "a": "bar"}"#,
                r#"{"b":"foo","a":"bar","d":"qux"}"#,
                r#"{"b":"foo", "a":"bar", "d":"qux", "c":"baz"}"#,
            ],
            &[
                r#"{"a": "foo", "b": "bar"}"#,
                r#"{"b": "bar"}"#,
                r#"{"a": "foo", "c": "baz"}"#,
                r#"{"a":"foo", "b":"bar", "c":"baz", "d":"qux"}"#,
            ],
        ),
        // Deliberate difference: llama.cpp drops `exclusiveMinimum` on a number and `uniqueItems`,
        // so its grammar admits a negative price and repeated tags; this crate refuses the
        // schema. The strings are checked against the schema without those two keywords, which
        // is the grammar llama.cpp emits.
        Case {
            ignored_by_llama: &["/properties/price/exclusiveMinimum", "/properties/tags/uniqueItems"],
            ..Case::new(
                "required props",
                PRODUCT,
                &[
                    r#"{"productId": 1, "productName": "A green door", "price": 12.50}"#,
                    r#"{"productId": 1, "productName": "A green door", "price": 12.50, "tags": ["home", "green"]}"#,
                    r#"{"productId": 1, "productName": "A green door", "price": 12.50, "tags": ["home", "green"], "dimensions": {"length": 785, "width": 250.5, "height": -0.359}}"#,
                ],
                &[
                    r#"{}"#,
                    r#"{"productName": "A green door", "price": 12.50, "productId": 1}"#,
                    r#"{"productId": 1, "productName": "A green door"}"#,
                    r#"{"productName": "A green door", "price": 12.50}"#,
                    r#"{"productId": 1, "productName": "A green door", "price": 12.50, "tags": []}"#,
                    r#"{"productId": 1, "productName": "A green door", "price": 12.50, "dimensions": {"length": 785, "width": 250.5, "height": -0.359}, "tags": ["home", "green"]}"#,
                ],
            )
        },
    ]);
}
